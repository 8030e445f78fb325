"""`gpuportal session start/open/stop` through the real hub. It lives beside the session-scoped hub
fixture, so the test run starts one hub, not a second copy on the same ports."""

import pytest

from gpuportal_cli.client import Exit
from tests.cli.conftest import cli, logged_in  # noqa: F401 (fixtures)
from tests.slurm_waits import wait_until_gone

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_session_start_open_and_stop_through_the_hub(request, portal_hub):
    alice_cli = request.getfixturevalue("logged_in")  # `gpuportal login` as alice
    started = alice_cli("--json", "session", "start", "--name", "cli-real", "--gpus", "1", "--hours", "1",
                        "--wait", "--interval", "1", timeout=180)
    assert started.returncode == 0, started.stderr
    card = started.json()
    assert card["state"] == "ready" and card["gpus"] == 1 and card["job_id"]
    assert card["url"] == f"{portal_hub.url}/user/alice/cli-real/lab"
    opened = alice_cli("open", "cli-real")
    assert opened.returncode == 0 and opened.stdout.strip() == card["url"]
    listed = alice_cli("--json", "sessions").json()
    assert [s["name"] for s in listed] == ["cli-real"]

    stopped = alice_cli("session", "stop", "cli-real")
    assert stopped.returncode == 0, stopped.stderr
    wait_until_gone([card["job_id"]], "the stopped server's job")
    assert alice_cli("open", "cli-real").returncode == Exit.CONFLICT  # ended: nothing to open
