"""Shared by the benchmarks: slurmctld RPC counts (from `sdiag`) and percentiles."""

import re
import subprocess

RPC = re.compile(r"^\s+(\w+)\s+\(\s*\d+\)\s+count:(\d+)", re.MULTILINE)


def _sdiag() -> str:
    return subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout


def rpc_total() -> int:
    """Every RPC slurmctld counted so far, except sdiag's own."""
    by_type = _sdiag().split("by message type")[1].split("by user")[0]
    return sum(int(count) for name, count in RPC.findall(by_type) if name != "REQUEST_STATS_INFO")


def rpc_by_users(users: set[str]) -> int:
    """RPCs slurmctld counted so far from these users (sdiag's own, as root, are not among them)."""
    by_user = _sdiag().split("by user")[1].split("Pending RPC")[0]
    return sum(int(count) for name, count in RPC.findall(by_user) if name in users)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]
