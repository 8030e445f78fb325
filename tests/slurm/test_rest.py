"""The slurmrestd adapter's mapping, on answers recorded from the bed's real slurmrestd (22.05.8,
tests/slurm/rest_responses/: HTTP 200 for a success, 500 for any failure, as slurmrestd answers);
the real thing, both adapters, is in test_adapter_real.py."""

import json
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured

from portal.jobs.services.prepare import _header
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected, SlurmTimedOut, SlurmUnreachable
from slurm.rest import SlurmRest, job_properties, sbatch_options
from slurm.runner import SlurmRunner
from slurm.tokens import TokenCache

RESPONSES = Path(__file__).parent / "rest_responses"
TOKEN_HELPER = Path(__file__).resolve().parents[2] / "deploy/libexec/slurm-token"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RESPONSES / f"{name}.json").read_text())


@dataclass
class Answer:
    status_code: int
    body: Any

    @property
    def ok(self) -> bool:
        return self.status_code < 400

    @property
    def text(self) -> str:
        return json.dumps(self.body)

    def json(self) -> Any:
        return self.body


@dataclass
class Recorded:
    """A requests.Session stand-in: answers in order, and what it was asked."""

    answers: list[Answer]
    asked: list[dict[str, Any]] = field(default_factory=list)

    def request(self, method: str, url: str, **kwargs: Any) -> Answer:
        self.asked.append({"method": method, "url": url, **kwargs})
        return self.answers.pop(0)


class Tokens(TokenCache):
    def __init__(self) -> None:
        super().__init__(command=["/bin/false"])
        self.forgotten: list[str] = []

    def token(self, user: str) -> str:
        return f"token-of-{user}"

    def forget(self, user: str) -> None:
        self.forgotten.append(user)


def adapter(*answers: tuple[int, Any]) -> tuple[SlurmRest, Recorded]:
    session = Recorded([Answer(status, body) for status, body in answers])
    rest = SlurmRest(runner=SlurmRunner(bin_dir=Path("/usr/bin"), timeout=7), tokens=Tokens(),
                     session=session)  # type: ignore[arg-type]
    return rest, session


def test_queue_maps_jobs_as_squeue_prints_them():
    rest, session = adapter((200, recorded("jobs")))
    parsed = rest.queue()
    assert parsed.malformed == 0
    jobs = {job.job_id: job for job in parsed.rows}
    # The job that ended (FAILED) is left out, as plain squeue leaves it out.
    assert set(jobs) == {"3602", "3603", "3604_0", "3604_1", "3604_[2-5%2]"}
    held, running = jobs["3602"], jobs["3603"]
    assert (held.state, held.reason, held.name, held.comment) == (
        "PENDING", "JobHeldUser", "evil\nname\x1fwith", "adapter-test:hostile")
    assert (held.start_time, held.nodes, held.time_limit) == (None, "", timedelta(minutes=1))
    assert (running.state, running.reason, running.nodes, running.gpus) == ("RUNNING", "", "gpu-node1", 2)
    assert running.start_time == datetime(2026, 11, 26, 2, 43, 49, tzinfo=UTC)
    assert running.end_time - running.start_time == running.time_limit == timedelta(minutes=2)
    assert jobs["3604_[2-5%2]"].reason == "JobArrayTaskLimit"
    assert jobs["3604_0"].comment == "gpuportal:rec-array"
    (asked,) = session.asked
    assert (asked["method"], asked["url"]) == ("GET", "http://127.0.0.1:6820/slurm/v0.0.38/jobs")
    assert asked["headers"] == {"X-SLURM-USER-NAME": "gpuportal", "X-SLURM-USER-TOKEN": "token-of-gpuportal"}
    assert asked["timeout"] == (5.0, 7)


def test_queue_with_finished_keeps_the_ended_jobs():
    rest, _ = adapter((200, recorded("jobs")))
    assert {job.job_id: job.state for job in rest.queue(finished=True).rows}["3605"] == "FAILED"


def test_queue_takes_the_reasons_details_and_cpus_from_tres_as_squeue_does():
    answer = recorded("jobs")
    held = answer["jobs"][0]
    held |= {"state_reason": "ReqNodeNotAvail", "cpus": None, "tres_req_str": "cpu=6,mem=100M,node=2",
             "state_description": "ReqNodeNotAvail, UnavailableNodes:gpu-node[1-2]"}
    rest, _ = adapter((200, answer))
    (row,) = [job for job in rest.queue().rows if job.job_id == str(held["job_id"])]
    assert (row.reason, row.cpus) == ("ReqNodeNotAvail, UnavailableNodes:gpu-node[1-2]", 6)


def test_a_malformed_job_is_skipped_alone():
    answer = recorded("jobs")
    answer["jobs"][0]["node_count"] = "many"
    rest, _ = adapter((200, answer))
    parsed = rest.queue()
    assert parsed.malformed == 1 and len(parsed.rows) == 4


def test_accounting_maps_slurmdb_jobs_as_sacct_prints_them():
    rest, session = adapter((200, recorded("slurmdb_jobs")), (200, recorded("jobs")))
    parsed = rest.accounting(job_ids=["3602", "3603", "3604", "3605"])
    assert parsed.malformed == 0
    rows = {row.job_id: row for row in parsed.rows}
    assert set(rows) == {"3602", "3603", "3604_[2-5%2]", "3605", "3604_0", "3604_1", "3609"}
    gpu = rows["3603"]
    assert (gpu.base_state, gpu.gpus, gpu.nodes, gpu.elapsed_seconds, gpu.user, gpu.partition) == (
        "CANCELLED", 2, "gpu-node1", 3, "alice", "gpu")
    assert gpu.comment == "gpuportal:rec-run" and gpu.submit_line == ""
    assert (rows["3602"].nodes, rows["3602"].reason) == ("", "JobHeldUser")
    # slurmdb v0.0.38 says SUCCESS/0 for `exit 3` (and a cancelled job): slurmctld's record has them.
    assert (rows["3605"].base_state, rows["3605"].exit_code, rows["3605"].exit_signal) == ("FAILED", 3, 0)
    assert (rows["3603"].exit_code, rows["3603"].exit_signal) == (0, 0)
    accounting, jobs = session.asked
    assert accounting["url"].endswith("/slurmdb/v0.0.38/jobs") and jobs["url"].endswith("/slurm/v0.0.38/jobs")
    assert accounting["params"] == {"skip_steps": "true", "step": "3602,3603,3604,3605"}


def test_an_exit_code_slurmctld_no_longer_has_is_unknown_never_0():
    rest, _ = adapter((200, recorded("slurmdb_jobs")), (500, recorded("jobs_controller_down")))
    rows = {row.job_id: row for row in rest.accounting(job_ids=["3605"]).rows}
    assert (rows["3605"].base_state, rows["3605"].exit_code) == ("FAILED", None)
    assert (rows["3603"].base_state, rows["3603"].exit_code) == ("CANCELLED", None)
    assert [row.exit_code for row in rows.values() if row.base_state == "COMPLETED"] == []


def test_a_completed_job_needs_no_second_request():
    answer = recorded("slurmdb_jobs")
    answer["jobs"] = [job | {"state": {"current": "COMPLETED", "reason": "None"}} for job in answer["jobs"]]
    rest, session = adapter((200, answer))
    assert {row.exit_code for row in rest.accounting(job_ids=["3603"]).rows} == {0}
    assert len(session.asked) == 1


def test_accounting_since_is_relative_and_filters_users_here():
    rest, session = adapter((200, recorded("slurmdb_jobs")))
    since = datetime.now(UTC) - timedelta(minutes=10)
    assert rest.accounting(since=since, users=["bob"]).rows == []
    params = session.asked[0]["params"]
    assert params["end_time"] == "now" and params["start_time"] in ("now-601seconds", "now-602seconds")
    with pytest.raises(ValueError, match="timezone-aware"):
        rest.accounting(since=datetime.now())


def test_a_requeued_jobs_latest_record_wins():
    answer = recorded("slurmdb_jobs")
    earlier = json.loads(json.dumps(answer["jobs"][1]))  # 3603, as first run before a requeue
    earlier["time"]["submission"] -= 60
    earlier["state"]["current"] = "REQUEUED"
    answer["jobs"] += [earlier]
    rest, _ = adapter((200, answer), (200, recorded("jobs")))
    rows = [row for row in rest.accounting(since=datetime.now(UTC), users=["alice"]).rows
            if row.job_id == "3603"]
    assert [row.base_state for row in rows] == ["CANCELLED"]


def test_submit_sends_the_scripts_options_and_a_whole_environment():
    rest, session = adapter((200, recorded("submit")))
    script = "#!/bin/bash\n#SBATCH --time=1 --mem=100M\n#SBATCH -J 'two words' --hold\n\n# a note\n" \
             "#SBATCH --output=/dev/null\nsleep 60\n#SBATCH --not-an-option-after-the-body\n"
    job_id = rest.submit(script=script, user="alice", comment="gpuportal:x",
                         environment={"GPUPORTAL_URL": "u"}, secrets={"GPUPORTAL_REGISTRY_PASSWORD": "s"})
    # The held job's "pending scheduler release" note comes with a success.
    assert job_id == "3609"
    body = session.asked[0]["json"]
    assert body["script"] == script
    job = body["job"]
    assert {key: job[key] for key in ("time_limit", "memory_per_node", "name", "hold", "standard_output",
                                      "comment", "current_working_directory")} == {
        "time_limit": "1", "memory_per_node": "100M", "name": "two words", "hold": True,
        "standard_output": "/dev/null", "comment": "gpuportal:x", "current_working_directory": "/home/alice"}
    assert job["environment"]["GPUPORTAL_REGISTRY_PASSWORD"] == "s"
    assert job["environment"]["GPUPORTAL_URL"] == "u" and job["environment"]["USER"] == "alice"
    assert session.asked[0]["headers"]["X-SLURM-USER-NAME"] == "alice"


def test_the_portals_own_job_header_maps_to_job_properties():
    from types import SimpleNamespace

    draft = SimpleNamespace(name="train x", uuid="u-1", partition=SimpleNamespace(name="gpu"), nodes=2,
                            cpus_per_node=8, mem_mb_per_node=4096, account="vision", gpus_per_node=2,
                            time_limit=timedelta(hours=1, minutes=30), output_dir="/home/bob/gpuportal/jobs")
    paths = SimpleNamespace(stdout="/home/bob/o.out", stderr="/home/bob/o.err")
    assert job_properties(_header(draft, paths)) == {  # type: ignore[arg-type]
        "name": "train x", "comment": "gpuportal:u-1", "partition": "gpu", "nodes": "2",
        "tasks_per_node": "1", "cpus_per_task": "8", "memory_per_node": "4096M", "account": "vision",
        "gres": "gpu:2", "time_limit": "0-01:30:00", "current_working_directory": "/home/bob/gpuportal/jobs",
        "standard_output": "/home/bob/o.out", "standard_error": "/home/bob/o.err"}


@pytest.mark.parametrize("line", ["#SBATCH --time", "#SBATCH 'unclosed", "#SBATCH plain-word"])
def test_unreadable_sbatch_lines_are_rejected(line):
    with pytest.raises(SlurmRejected):
        sbatch_options(f"#!/bin/bash\n{line}\ntrue\n")


@pytest.mark.parametrize(("name", "status", "error", "message"), [
    ("submit_rejected", 500, SlurmRejected, "Requested node configuration is not available"),
    ("cancel_unknown", 500, SlurmRejected, "Invalid job id specified"),
    ("time_limit_denied", 500, SlurmRejected, "Access/permission denied"),
    ("submit_controller_down", 500, SlurmUnreachable, "Unable to contact slurm controller"),
    ("cancel_controller_down", 500, SlurmUnreachable, "Unable to contact slurm controller"),
    ("jobs_controller_down", 500, SlurmUnreachable, "Failed while looking for jobs"),
    ("time_limit_controller_down", 500, SlurmUnreachable, "job update"),
])
def test_slurms_errors_raise_as_on_the_command_path(name, status, error, message):
    rest, _ = adapter((status, recorded(name)))
    calls = {"submit": lambda: rest.submit(script="#!/bin/bash\ntrue\n", user="alice", comment="c"),
             "cancel": lambda: rest.cancel(job_id="3588", user="alice"),
             "jobs": rest.queue,
             "time": lambda: rest.time_limit_set(job_id="3588", minutes=5)}
    with pytest.raises(error, match=message) as raised:
        calls[name.split("_")[0]]()
    assert type(raised.value) is error


def test_a_refused_token_is_forgotten_and_unreachable():
    rest, _ = adapter((401, None))
    with pytest.raises(SlurmUnreachable, match="refused the token of gpuportal"):
        rest.queue()
    assert rest.tokens.forgotten == ["gpuportal"]  # type: ignore[union-attr]


def test_nothing_listening_is_unreachable():
    rest = SlurmRest(runner=SlurmRunner(bin_dir=Path("/usr/bin"), timeout=2), tokens=Tokens(),
                     url="http://127.0.0.1:9")
    with pytest.raises(SlurmUnreachable, match="cannot reach slurmrestd"):
        rest.queue()


def test_no_answer_in_time_is_timed_out():
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        rest = SlurmRest(runner=SlurmRunner(bin_dir=Path("/usr/bin"), timeout=0.5), tokens=Tokens(),
                         url=f"http://127.0.0.1:{server.getsockname()[1]}")
        with pytest.raises(SlurmTimedOut):
            rest.cancel(job_id="1", user="alice")


# --- Tokens ---


def _token_command(tmp_path: Path) -> list[str]:
    """Prints a new token each call (its call count), as slurm-token prints one."""
    script = tmp_path / "token"
    script.write_text(f"#!/bin/sh\necho $1-$2 >>{tmp_path}/calls\nwc -l <{tmp_path}/calls\n")
    script.chmod(0o755)
    return [str(script)]


def test_a_token_is_cached_until_shortly_before_it_expires(tmp_path):
    now = [1000.0]
    cache = TokenCache(command=_token_command(tmp_path), lifespan=600, renew_before=120, clock=lambda: now[0])
    first = cache.token("alice")
    now[0] += 479
    assert cache.token("alice") == first
    assert cache.token("bob") != first
    now[0] += 2  # 119 s left on alice's
    assert cache.token("alice") != first
    assert (tmp_path / "calls").read_text().split() == ["alice-600", "bob-600", "alice-600"]


def test_a_forgotten_token_is_fetched_again(tmp_path):
    cache = TokenCache(command=_token_command(tmp_path))
    first = cache.token("alice")
    cache.forget("alice")
    assert cache.token("alice") != first


@pytest.mark.parametrize(("lifespan", "renew"), [(901, 120), (600, 600), (600, 0)])
def test_a_long_lived_token_cannot_be_configured(lifespan, renew):
    with pytest.raises(ValueError, match="lifespan"):
        TokenCache(command=["/bin/true"], lifespan=lifespan, renew_before=renew)


def test_a_failing_token_command_raises_its_message(tmp_path):
    script = tmp_path / "token"
    script.write_text("#!/bin/sh\necho 'slurm-token: scontrol: Unable to contact slurm controller' >&2\n"
                      "exit 1\n")
    script.chmod(0o755)
    with pytest.raises(SlurmUnreachable, match="Unable to contact"):
        TokenCache(command=[str(script)]).token("alice")


@pytest.mark.parametrize("argv", [["eve", "60"], ["root", "60"], ["nobody", "60"], ["alice", "901"],
                                  ["alice", "0"], ["alice"], ["alice", "60", "x"], ["../alice", "60"]])
def test_the_token_helper_refuses_anybody_else_and_long_lifespans(argv):
    done = subprocess.run([TOKEN_HELPER, *argv], capture_output=True, text=True, timeout=20)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.startswith("slurm-token: ")


def test_the_setting_picks_the_adapter_and_one_token_cache_serves_the_process(settings):
    settings.SLURM_ADAPTER = "slurmrestd"
    first, second = Slurm.from_settings(), Slurm.from_settings()
    assert isinstance(first, SlurmRest) and first.tokens is second.tokens and first.session is second.session
    assert first.url == "http://127.0.0.1:6820" and first.operator == "gpuportal"
    settings.SLURM_ADAPTER = "sudo"
    assert type(Slurm.from_settings()) is Slurm
    settings.SLURM_ADAPTER = "rest"
    with pytest.raises(ImproperlyConfigured, match="SLURM_ADAPTER"):
        Slurm.from_settings()
