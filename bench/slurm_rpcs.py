"""Counting a bench's own Slurm RPCs on the shared bed: its Slurm commands run as an otherwise unused
user (wrappers around /usr/bin), so slurmctld's `sdiag` and slurmdbd's `sacctmgr show stats`, by user,
count exactly its RPCs whatever else the bed does."""

import re
import subprocess
from pathlib import Path

RPC = re.compile(r"^\s+(\w+)\s+\(\s*\d+\)\s+count:(\d+)", re.MULTILINE)
COMMANDS = ("sinfo", "squeue", "sprio", "sshare", "sacct", "scancel", "scontrol")


def by_user(output: str, user: str) -> int:
    section = output.split("by user", 1)[1]
    return sum(int(count) for name, count in RPC.findall(section) if name == user)


def rpcs(user: str) -> tuple[int, int]:
    """(slurmctld, slurmdbd) RPCs counted so far from `user`."""
    ctld = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    dbd = subprocess.run(["sacctmgr", "show", "stats"], capture_output=True, text=True, check=True).stdout
    return by_user(ctld.split("Pending RPC")[0], user), by_user(dbd, user)


def wrappers(folder: Path, user: str, sacct_runs: Path | None = None) -> Path:
    """`folder`, made a bin dir whose Slurm commands run as `user`; with `sacct_runs`, each sacct run
    adds a line to that file."""
    folder.mkdir()
    for command in COMMANDS:
        count = f"echo >> {sacct_runs}\n" if command == "sacct" and sacct_runs else ""
        path = folder / command
        path.write_text(f'#!/bin/sh\n{count}exec /usr/sbin/runuser -u {user} -- /usr/bin/{command} "$@"\n')
        path.chmod(0o755)
    return folder
