"""Tasks for tests/deploy/test_topology_real.py only: its Celery worker loads them with -I, so
production code carries none. There is no result backend: each task leaves its result in a file,
with the pid of the process that ran it."""

import os
import time
from pathlib import Path

from celery import shared_task


@shared_task(ignore_result=True)
def record(path: str, text: str) -> None:
    Path(path).write_text(f"{os.getpid()} {text}")


@shared_task(ignore_result=True)
def sleep(path: str, seconds: float) -> None:
    """Says it started, then outsleeps the time limit; the worker kills it before it writes again."""
    Path(path).write_text(f"{os.getpid()} started")
    time.sleep(seconds)
    Path(path).write_text(f"{os.getpid()} finished")
