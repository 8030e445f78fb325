"""An app that answered asks for a poll cycle now, by the task's name: that name must be known in a
web process, which imports no tasks module by itself (a worker does)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_web_process_knows_the_early_poll_task():
    code = ("import django; django.setup(); import portal.wsgi; from celery import current_app; "
            "print('portal.poll.tasks.poll_cycle_soon' in current_app.tasks)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.stdout.strip() == "True", result.stderr
