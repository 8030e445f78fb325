"""The CLI as a user runs it, against the live portal on the real stack: LDAP login, jobs and
TensorBoards through Slurm (the poll cycle runs in the background, as beat would). Sessions through
the real hub: tests/sessions/test_cli_sessions_real.py (the hub fixture lives there)."""

import pwd
import shutil
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from gpuportal_cli.client import Exit
from portal.webapps.catalog import catalog_sync
from tests.cli.conftest import GPUPORTAL, login
from tests.hub import wait_for
from tests.slurm_waits import SLURM_PATIENCE, wait_until_gone

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def job_state(cli, job_id):
    return cli("--json", "job", str(job_id)).json()["state"]


def test_login_saves_a_private_token_and_never_prints_it(cli):
    done = login(cli, "--json")
    assert done.returncode == 0, done.stderr
    shown = done.json()
    assert shown["username"] == "alice" and shown["url"] == cli.url and "token" not in shown
    saved = cli.config_file.read_text()
    token = next(line.split('"')[1] for line in saved.splitlines() if line.startswith("token ="))
    assert token not in done.stdout + done.stderr
    assert stat.S_IMODE(cli.config_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(cli.config_file.parent.stat().st_mode) == 0o700
    assert f'url = "{cli.url}"' in saved

    me = cli("--json", "whoami")  # the URL and token now come from the config file
    assert me.returncode == 0 and me.json()["username"] == "alice"
    assert cli("--json", "logout").json() == {"url": cli.url, "revoked": True, "removed": True}
    assert token not in cli.config_file.read_text()
    revoked = cli("whoami", GPUPORTAL_TOKEN=token)  # revoked at the portal, not only forgotten
    assert revoked.returncode == Exit.AUTH and "gpuportal login" in revoked.stderr


def test_wrong_password_is_an_auth_error(cli):
    done = cli("login", "--url", cli.url, "-u", "alice", "--password-stdin", input="wrong\n")
    assert done.returncode == Exit.AUTH and "Wrong username or password" in done.stderr
    assert not cli.config_file.exists()


def test_submit_wait_completes_and_logs_follow_prints_the_output(logged_in, poller):
    done = logged_in("--json", "submit", "custom", "-p", "commands=echo cli-hello; sleep 1; echo cli-bye",
                     "--gpus", "0", "--time", "5", "--name", "cli wait", "--wait", "--interval", "0.5")
    assert done.returncode == 0, done.stderr
    job = done.json()
    assert (job["state"], job["exit_code"], job["name"]) == ("COMPLETED", 0, "cli wait")
    followed = logged_in("logs", str(job["id"]), "--follow")
    assert followed.returncode == 0
    assert "cli-hello\ncli-bye\n" in followed.stdout


def test_logs_follow_streams_a_running_job_until_it_ends(logged_in, poller):
    submitted = logged_in("--json", "submit", "custom", "--gpus", "0", "--time", "5", "-p",
                          "commands=for i in 1 2 3 4; do echo tick $i; sleep 1; done")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.json()["id"]
    started = time.monotonic()
    followed = logged_in("logs", str(job_id), "--follow", "--interval", "0.5")
    assert followed.returncode == 0, followed.stderr
    assert "tick 1\ntick 2\ntick 3\ntick 4\n" in followed.stdout
    assert time.monotonic() - started >= 3  # it waited for the job, not just read a finished file
    assert job_state(logged_in, job_id) == "COMPLETED"
    as_json = logged_in("--json", "logs", str(job_id)).json()
    assert as_json["complete"] is True and "tick 4" in as_json["text"]


def test_job_by_the_slurm_id_squeue_shows(logged_in, poller):
    done = logged_in("--json", "submit", "custom", "-p", "commands=echo found-by-slurm-id", "--gpus", "0",
                     "--time", "5", "--wait", "--interval", "0.5")
    assert done.returncode == 0, done.stderr
    job = done.json()
    slurm_id = job["slurm_job_id"]
    assert slurm_id.isdigit(), job
    shown = logged_in("job", slurm_id)  # stdout is a pipe: "label<TAB>value" lines
    assert shown.returncode == 0, shown.stderr
    lines = dict(line.split("\t", 1) for line in shown.stdout.splitlines())
    assert (lines["Job"], lines["Slurm job"], lines["Portal ID"]) == (str(job["id"]), slurm_id, job["uuid"])
    if job["id"] != int(slurm_id):  # the test database's job numbers may reach the bed's Slurm ids
        assert f"job {slurm_id} is Slurm job {slurm_id}: portal job {job['id']}" in shown.stderr
    logs = logged_in("logs", slurm_id)
    assert logs.returncode == 0 and "found-by-slurm-id" in logs.stdout
    assert logged_in("--json", "job", job["uuid"]).json()["id"] == job["id"]


def test_a_failing_job_makes_wait_exit_1(logged_in, poller):
    done = logged_in("submit", "custom", "-p", "commands=echo about to fail; exit 3", "--gpus", "0",
                     "--time", "5", "--wait", "--interval", "0.5")
    assert done.returncode == Exit.UNSUCCESSFUL == 1
    assert "FAILED, exit code 3" in done.stderr


def test_a_job_slurm_rejects_says_why(logged_in, poller, settings):
    # Memory no node has: sbatch refuses, and --wait ends at once with Slurm's message.
    settings.POLICY_PARTITION_RESOURCES = {"*": {"cpus_per_gpu": 8, "mem_gb_per_gpu": 48,
                                               "cpus_without_gpu": 1, "mem_gb_without_gpu": 4000}}
    done = logged_in("submit", "custom", "-p", "commands=true", "--gpus", "0", "--time", "5", "--wait")
    assert done.returncode == Exit.UNSUCCESSFUL
    assert "REJECTED" in done.stderr and "Memory specification can not be satisfied" in done.stderr


def test_cancel_a_long_job(logged_in, poller):
    submitted = logged_in("--json", "submit", "custom", "-p", "commands=sleep 300", "--gpus", "0",
                          "--time", "10")
    job = submitted.json()
    wait_for(lambda: job_state(logged_in, job["id"]) == "RUNNING", SLURM_PATIENCE, "the job to run",
             interval=1)
    done = logged_in("--json", "cancel", str(job["id"]), "--wait", "--interval", "0.5")
    assert done.returncode == 0, done.stderr
    assert done.json()["state"] == "CANCELLED"
    slurm_job = done.json()["slurm_job_id"]
    wait_until_gone([slurm_job], "the cancelled job")
    listed = logged_in("--json", "jobs", "--state", "CANCELLED").json()
    assert [j["id"] for j in listed] == [job["id"]]


@pytest.fixture
def empty_logdir(settings, live_server):
    """A folder of alice's, and the app catalog; the job's runner reports to this test's portal."""
    settings.PORTAL_URL_FOR_JOBS = live_server.url
    catalog_sync()
    account = pwd.getpwnam("alice")
    folder = Path(account.pw_dir) / f"cli-tb-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    shutil.chown(folder, account.pw_uid, account.pw_gid)
    yield folder
    shutil.rmtree(folder)


def test_tensorboard_start_list_stop(logged_in, poller, empty_logdir):
    started = logged_in("--json", "tensorboard", "start", "--logdir", str(empty_logdir), "--wait",
                        "--interval", "0.5", timeout=150)
    assert started.returncode == 0, started.stderr
    board = started.json()
    assert board["state"] == "ready" and board["logdir"] == str(empty_logdir)
    assert board["url"] == f"{logged_in.url}/apps/{board['id']}/open/"
    assert [b["id"] for b in logged_in("--json", "tensorboard", "list").json()] == [board["id"]]
    assert str(board["id"]) in logged_in("tensorboard", "list").stdout

    stopped = logged_in("--json", "tensorboard", "stop", str(board["id"]))
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.json()["state"] == "ended" and "Stopped by you" in stopped.json()["reason"]
    wait_until_gone([board["slurm_job_id"]], "the stopped TensorBoard's job")


def test_the_console_script_is_installed_in_the_venv():
    out = subprocess.run([str(GPUPORTAL), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("gpuportal, version ")
