"""The CLI against the live portal without Slurm or LDAP: settings, errors and exit codes, --json,
idempotent retries, sessions through a fake hub."""

import json
import stat
from datetime import timedelta

import pytest
import requests
from click.testing import CliRunner
from django.utils import timezone

from gpuportal_cli import config
from gpuportal_cli.client import Exit
from gpuportal_cli.main import app
from portal.accounts.models import ApiToken
from portal.accounts.services import api_token_create
from portal.benchmarks.services import result_import
from portal.jobs.models import Job
from portal.projects.models import Project
from portal.sessions.hub import HubServer, JupyterHub
from portal.sessions.services.hub_sync import servers_hub_sync
from tests.cli.conftest import Cli
from tests.conftest import ROOT
from tests.factories import AppFactory, JobFactory
from tests.sessions.factories import DebugPartitionFactory, PartitionFactory
from tests.sessions.test_api import FakeHub


@pytest.fixture
def fake_hub(monkeypatch, transactional_db):
    """The servers' hub adapter in memory; the live server is a thread of this process, so it sees it."""
    PartitionFactory()
    DebugPartitionFactory()
    fake = FakeHub()
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: fake))
    return fake


@pytest.fixture
def no_sbatch(monkeypatch):
    """Jobs are stored and answered, never given to Slurm (Celery is eager in tests)."""
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


def test_help_documents_exit_codes_and_completion(tmp_path):
    cli = Cli(tmp_path, "")
    help_text = cli("--help").stdout
    assert "Exit codes:" in help_text and "3  authentication" in help_text
    assert "_GPUPORTAL_COMPLETE=bash_source gpuportal" in help_text
    completion = cli(_GPUPORTAL_COMPLETE="bash_source")
    assert completion.returncode == 0
    assert "complete -o nosort -F _gpuportal_completion gpuportal" in completion.stdout


def test_shell_completion_lists_commands(tmp_path):
    done = Cli(tmp_path, "")(_GPUPORTAL_COMPLETE="bash_complete", COMP_WORDS="gpuportal su", COMP_CWORD="1")
    assert "plain,submit" in done.stdout.splitlines()


def test_no_portal_url_is_a_usage_error(tmp_path):
    done = Cli(tmp_path, "")("jobs")
    assert done.returncode == Exit.USAGE and "gpuportal login --url" in done.stderr


def test_not_logged_in_says_to_log_in(cli):
    done = cli("--url", cli.url, "jobs")
    assert done.returncode == Exit.AUTH and "gpuportal login" in done.stderr


def test_bad_token_is_an_auth_error(cli, transactional_db):
    done = cli("jobs", GPUPORTAL_URL=cli.url, GPUPORTAL_TOKEN="not-a-token")
    assert done.returncode == Exit.AUTH == 3
    assert "Invalid or revoked token" in done.stderr and "gpuportal login" in done.stderr
    as_json = cli("jobs", "--json", GPUPORTAL_URL=cli.url, GPUPORTAL_TOKEN="not-a-token")
    assert as_json.returncode == 3 and as_json.stdout == ""
    assert as_json.error()["status"] == 401 and as_json.error()["exit_code"] == 3


def test_expired_token_is_an_auth_error(cli, alice):
    token, key = api_token_create(user=alice, name="old")
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    done = cli("whoami", GPUPORTAL_URL=cli.url, GPUPORTAL_TOKEN=key)
    assert done.returncode == Exit.AUTH and "gpuportal login" in done.stderr


def test_unreachable_portal_is_a_network_error(tmp_path):
    done = Cli(tmp_path, "")("--url", "http://127.0.0.1:9", "jobs", GPUPORTAL_TOKEN="x")
    assert done.returncode == Exit.UNAVAILABLE == 6
    assert "Cannot reach the portal at http://127.0.0.1:9" in done.stderr


def test_an_address_that_is_not_a_portal_is_said_so(token_cli):
    done = token_cli("jobs", "--url", f"{token_cli.url}/static")
    assert done.returncode == Exit.NOT_FOUND and "not a gpuportal API answer" in done.stderr


def test_validation_error_names_the_field(token_cli, no_sbatch):
    done = token_cli("submit", "custom", "--param", "gpus=99", "-p", "commands=#SBATCH --mem=1T")
    assert done.returncode == Exit.INVALID == 4
    assert "parameters.gpus: Must be at most 8." in done.stderr
    assert "parameters.commands: #SBATCH lines are not allowed" in done.stderr
    as_json = token_cli("--json", "submit", "nope")
    assert as_json.returncode == 4 and as_json.error()["fields"] == {"template": ["Unknown template 'nope'."]}
    assert not Job.objects.exists()


def test_not_found_and_conflict_exit_codes(token_cli, alice):
    assert token_cli("job", "999999").returncode == Exit.NOT_FOUND
    ended = JobFactory(user=alice, state="COMPLETED")
    done = token_cli("cancel", str(ended.pk))
    assert done.returncode == Exit.CONFLICT and "already completed" in done.stderr


def test_every_read_command_prints_json(token_cli, alice, fake_hub):
    job = JobFactory(user=alice, name="history")
    outputs = {args: token_cli("--json", *args) for args in [
        ("whoami",), ("templates",), ("templates", "custom"), ("jobs",), ("jobs", "--state", "completed"),
        ("job", str(job.pk)), ("logs", str(job.pk)), ("environments",), ("sessions",)]}
    for args, done in outputs.items():
        assert done.returncode == 0, (args, done.stderr)
        json.loads(done.stdout)
    assert outputs[("whoami",)].json()["username"] == "alice"
    assert [j["name"] for j in outputs[("jobs",)].json()] == ["history"]
    assert outputs[("job", str(job.pk))].json()["script"] == job.script
    assert outputs[("logs", str(job.pk))].json()["exists"] is False
    assert "custom" in {t["slug"] for t in outputs[("templates",)].json()["templates"]}
    # Per-command --json works too, and tables go to stdout without it.
    assert token_cli("jobs", "--json").json()[0]["id"] == job.pk
    assert "history" in token_cli("jobs").stdout


def test_text_from_the_portal_is_printed_as_it_is(token_cli, alice):
    job = JobFactory(user=alice, name="[/oops] [red]x", reason="[bold]why")  # not Rich markup
    listed = token_cli("jobs")
    assert listed.returncode == 0 and "[/oops] [red]x" in listed.stdout
    shown = token_cli("job", str(job.pk))
    assert shown.returncode == 0 and "[/oops] [red]x" in shown.stdout and "[bold]why" in shown.stdout


def test_jobs_filters_reach_the_api(token_cli, alice):
    JobFactory(user=alice, name="ok", state="COMPLETED")
    JobFactory(user=alice, name="bad", state="FAILED", template="pytorch-train")
    assert [j["name"] for j in token_cli("jobs", "--json", "--state", "FAILED").json()] == ["bad"]
    assert [j["name"] for j in token_cli("jobs", "--json", "--template", "custom").json()] == ["ok"]
    assert len(token_cli("jobs", "--json", "--limit", "1").json()) == 1


def test_jobs_follows_the_cursor_across_pages(token_cli, alice):
    JobFactory.create_batch(203, user=alice)  # one more page than the API's largest (200)
    rows = token_cli("jobs", "--json", "--limit", "1000").json()
    assert len({row["id"] for row in rows}) == 203


def test_submit_coerces_parameters_to_the_templates_types(token_cli, no_sbatch, tmp_path, partitions):
    script = tmp_path / "run.sh"
    script.write_text("echo from a file\n")
    done = token_cli("--json", "submit", "custom", "-p", f"commands=@{script}", "--gpus", "0",
                     "--time", "5", "-p", "nodes=1", "--name", "typed")
    assert done.returncode == 0, done.stderr
    job = done.json()
    assert job["name"] == "typed" and job["state"] == "QUEUED_IN_PORTAL"
    assert Job.objects.get().parameters | {"commands": "echo from a file\n", "gpus": 0, "time_limit": 5,
                                           "nodes": 1} == Job.objects.get().parameters


@pytest.fixture
def lost_first_answer(monkeypatch):
    """The first POST reaches the portal but its answer is lost (connection reset); returns the
    Idempotency-Keys the POSTs carried."""
    real_request = requests.Session.request
    keys = []

    def lossy(self, method, url, **kwargs):
        response = real_request(self, method, url, **kwargs)
        if method == "POST":
            keys.append(kwargs["headers"]["Idempotency-Key"])
            if len(keys) == 1:
                raise requests.ConnectionError("connection reset")
        return response

    monkeypatch.setattr(requests.Session, "request", lossy)
    return keys


def test_a_submit_whose_answer_was_lost_is_retried_and_creates_one_job(
        token_cli, no_sbatch, partitions, lost_first_answer):
    result = CliRunner().invoke(app, ["--json", "submit", "custom", "-p", "commands=true", "--gpus", "0"],
                                env=token_cli.env)
    assert result.exit_code == 0, result.output
    assert len(lost_first_answer) == 2 and lost_first_answer[0] == lost_first_answer[1]
    assert Job.objects.count() == 1 and json.loads(result.stdout)["id"] == Job.objects.get().pk


def test_a_session_start_whose_answer_was_lost_starts_one_server(token_cli, fake_hub, lost_first_answer):
    result = CliRunner().invoke(app, ["--json", "session", "start", "--name", "once"], env=token_cli.env)
    assert result.exit_code == 0, result.output
    assert len(lost_first_answer) == 2 and lost_first_answer[0] == lost_first_answer[1]
    assert len(fake_hub.started) == 1 and json.loads(result.stdout)["name"] == "once"


def test_sessions_start_open_stop(token_cli, fake_hub):
    started = token_cli("--json", "session", "start", "--name", "cli-one", "--gpus", "1", "--hours", "1")
    assert started.returncode == 0, started.stderr
    assert started.json()["name"] == "cli-one" and fake_hub.started[0]["gpus"] == 1
    assert [s["name"] for s in token_cli("--json", "sessions").json()] == ["cli-one"]
    not_ready = token_cli("open", "cli-one")
    assert not_ready.returncode == Exit.CONFLICT and "not ready" in not_ready.stderr

    fake_hub.running["cli-one"] = HubServer(name="cli-one", ready=True, pending=None,
                                            url="/user/alice/cli-one/", last_activity=None,
                                            user_options=fake_hub.started[0], job_id="4242")
    servers_hub_sync()  # the poll cycle's look at the hub: the CLI reads what the portal recorded
    opened = token_cli("open")
    assert opened.returncode == 0 and opened.stdout.strip().endswith("/user/alice/cli-one/lab")
    assert token_cli("--json", "open", "cli-one").json()["state"] == "ready"
    assert token_cli("open", "cli-one", "--browser", BROWSER="true").returncode == 0
    assert token_cli("--json", "session", "show", "cli-one").json()["job_id"] == "4242"

    stopped = token_cli("--json", "session", "stop", "cli-one")
    assert stopped.returncode == 0 and stopped.json() == {"name": "cli-one", "stopped": True}
    assert "cli-one" not in fake_hub.running
    assert token_cli("session", "stop", "nope").returncode == Exit.NOT_FOUND


def test_session_options_are_validated_by_the_portal(token_cli, fake_hub):
    done = token_cli("session", "start", "--name", "Bad_Name")
    assert done.returncode == Exit.INVALID and "name:" in done.stderr
    assert token_cli("session", "start", "--hours", "0").returncode == Exit.USAGE  # refused locally


def test_a_session_under_a_project_names_it_and_another_groups_is_refused(token_cli, fake_hub, alice):
    alice.ldap_groups = ["portal-users", "vision"]
    alice.save()
    Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision", budget_gpu_hours=500)
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50)
    started = token_cli("--json", "session", "start", "--name", "proj", "--account", "vision")
    assert started.returncode == 0, started.stderr
    assert started.json()["account"] == "vision" and fake_hub.started[0]["account"] == "vision"
    assert "Project" in token_cli("session", "show", "proj").stdout
    refused = token_cli("session", "start", "--name", "other", "--account", "nlp")
    assert refused.returncode == Exit.INVALID and "account:" in refused.stderr and len(fake_hub.started) == 1


def test_benchmarks_are_listed_with_filters(token_cli, alice):
    text = (ROOT / "tests/benchmarks/fixtures/fio/randread_3.33.json").read_text()
    result_import(user=alice, tool="fio", text=text, context={"partition": "gpu"})
    rows = token_cli("--json", "benchmarks", "--tool", "fio", "--partition", "gpu").json()
    assert rows and {row["tool"] for row in rows} == {"fio"}
    assert token_cli("--json", "benchmarks", "--tool", "nccl").json() == []
    table = token_cli("benchmarks", "--not-flagged")
    assert table.returncode == 0 and "fio" in table.stdout
    bad = token_cli("benchmarks", "--tool", "bogus")
    assert bad.returncode == Exit.INVALID and "tool:" in bad.stderr


def test_tensorboard_commands(token_cli, alice):
    board = AppFactory(user=alice, state="ready", host="127.0.0.1", port=6006)
    listed = token_cli("--json", "tensorboard", "list").json()
    assert listed[0]["url"] == f"{token_cli.url}/apps/{board.pk}/open/"
    assert token_cli("tensorboard", "start").returncode == Exit.USAGE  # exactly one source
    outside = token_cli("tensorboard", "start", "--logdir", "/etc")
    assert outside.returncode == Exit.INVALID and "logdir:" in outside.stderr
    stopped = token_cli("--json", "tensorboard", "stop", str(board.pk))  # no Slurm job: just ended
    assert stopped.returncode == 0 and stopped.json()["state"] == "ended"
    assert token_cli("tensorboard", "stop", "999999").returncode == Exit.NOT_FOUND


def test_a_portal_without_an_api_says_so(token_cli):
    done = token_cli("benchmarks", "--url", f"{token_cli.url}/nothing-here")
    assert done.returncode == Exit.NOT_FOUND and "has no /api/v1/benchmarks/ API" in done.stderr


def test_a_broken_or_exposed_config_file_is_reported(tmp_path):
    cli = Cli(tmp_path, "")
    cli.config_file.parent.mkdir(parents=True)
    cli.config_file.write_text("url = \"http://127.0.0.1:9\"\ntoken = \"abc\"\n")
    cli.config_file.chmod(0o644)
    exposed = cli("jobs")
    assert "readable by others: chmod 600" in exposed.stderr and exposed.returncode == Exit.UNAVAILABLE
    cli.config_file.write_text("url = [unclosed")
    broken = cli("jobs")
    assert broken.returncode == Exit.USAGE and f"Cannot read {cli.config_file}" in broken.stderr


def test_config_is_private_and_the_token_stays_with_its_portal(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.delenv(config.URL_ENV, raising=False)
    monkeypatch.delenv(config.TOKEN_ENV, raising=False)
    path = config.config_path()
    path.parent.mkdir()
    path.write_text("")
    path.chmod(0o644)
    config.save(config.Config(url="https://portal.example", token='se"cret', token_id=3, username="alice"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored, exposed = config.load()
    assert (stored.token, stored.token_id, exposed) == ('se"cret', 3, False)
    assert config.resolve(stored, url=None).token == 'se"cret'
    assert config.resolve(stored, url="https://portal.example/").token == 'se"cret'
    assert config.resolve(stored, url="https://elsewhere.example").token == ""
    monkeypatch.setenv(config.TOKEN_ENV, "from-env")
    assert config.resolve(stored, url="https://elsewhere.example").token == "from-env"
    with pytest.raises(config.ConfigError):
        config.resolve(stored, url="portal.example")
