import contextlib
import subprocess

import pytest


@pytest.fixture(autouse=True)
def _no_hub(settings):
    """The poll cycle's hub listing fails fast: these tests are about Slurm."""
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


@pytest.fixture
def sbatch():
    """Submits a real job as a bed user (sleep, 100 MB, no output) and cancels it afterwards."""
    submitted = []

    def submit(user: str, *options: str) -> str:
        argv = ["/usr/sbin/runuser", "-u", user, "--", "/usr/bin/sbatch", "--parsable", "--mem=100M",
                "--output=/dev/null", "--job-name=waits-test", *options, "--wrap", "sleep 300"]
        done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd="/tmp", timeout=20)
        submitted.append(done.stdout.strip().split(";")[0])
        return submitted[-1]

    yield submit
    with contextlib.suppress(subprocess.SubprocessError):
        subprocess.run(["scancel", *submitted], check=False, timeout=20)
