"""Shared by the benchmarks: slurmctld RPC counts (from `sdiag`), percentiles and timed GETs."""

import re
import subprocess
import time

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


def django_on(database: str) -> None:
    """Django on a database of the benchmark's own on the portal's PostgreSQL server (never the
    portal's), created if missing and migrated. Call before importing anything of the portal's."""
    import os
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    server = os.environ.get("BENCH_DATABASE_SERVER", "postgres://gpuportal:gpuportal@127.0.0.1:5433")
    os.environ["DATABASE_URL"] = f"{server}/{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.base")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver,127.0.0.1")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-not-a-secret")  # signs the bench's own sessions
    import django
    import psycopg

    with psycopg.connect(f"{server.replace('postgres://', 'postgresql://')}/postgres", autocommit=True) as db:
        if not db.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone():
            db.execute(f'CREATE DATABASE "{database}"')
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def timed(client, path: str, requests: int) -> list[float]:
    """`requests` GETs of `path` with a Django test client, each one's milliseconds (each must be 200)."""
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return times
