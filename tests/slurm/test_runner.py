"""The runner against stub Slurm commands (batchspawner's pattern); the real thing is in
test_adapter_real.py."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from slurm.errors import SlurmRejected, SlurmTimedOut, SlurmUnreachable
from slurm.runner import SlurmRunner


def _stub(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.fixture
def bin_dir(tmp_path):
    return tmp_path


def test_returns_stdout_and_passes_args_unsplit(bin_dir):
    _stub(bin_dir, "squeue", 'printf "%s\\n" "$@"')
    out = SlurmRunner(bin_dir).run("squeue", ["-o", "a b; rm -rf /"])
    assert out == "-o\na b; rm -rf /\n"


def test_controller_down_is_unreachable(bin_dir):
    _stub(bin_dir, "squeue", "echo 'squeue: error: Unable to contact slurm controller "
                             "(connect failure)' >&2; exit 1")
    with pytest.raises(SlurmUnreachable, match="Unable to contact slurm controller"):
        SlurmRunner(bin_dir).run("squeue", [])


def test_refusal_is_rejected_with_clean_message(bin_dir):
    _stub(bin_dir, "sbatch", "echo 'sbatch: error: Batch job submission failed: Requested node "
                             "configuration is not available' >&2; exit 1")
    with pytest.raises(SlurmRejected) as error:
        SlurmRunner(bin_dir).run("sbatch", [])
    assert error.value.message == (
        "Batch job submission failed: Requested node configuration is not available")


def test_hung_command_is_unreachable(bin_dir):
    _stub(bin_dir, "sinfo", "sleep 5")
    with pytest.raises(SlurmUnreachable, match="did not answer"):
        SlurmRunner(bin_dir, timeout=0.2).run("sinfo", [])


def test_missing_command_is_unreachable(bin_dir):
    with pytest.raises(SlurmUnreachable, match="cannot run"):
        SlurmRunner(bin_dir).run("sinfo", [])


def test_runs_as_user_through_exec_prefix(bin_dir):
    _stub(bin_dir, "prefix", 'echo "as $1"; shift; exec "$@"')
    _stub(bin_dir, "sbatch", "echo submitted")
    runner = SlurmRunner(bin_dir, exec_prefix=(str(bin_dir / "prefix"), "{username}"))
    assert runner.run("sbatch", [], as_user="alice") == "as alice\nsubmitted\n"


@pytest.mark.parametrize("name", ["alice;id", "-u root", "", "Alice", "a" * 40, "../x"])
def test_refuses_a_user_name_that_is_not_an_account(bin_dir, name):
    with pytest.raises(ValueError, match="not a Unix user name"):
        SlurmRunner(bin_dir, exec_prefix=("sudo", "-u", "{username}")).run(
            "sbatch", [], as_user=name)



def test_output_that_is_not_utf8_is_replaced_not_raised(bin_dir):
    _stub(bin_dir, "squeue", r"printf 'name\377\376 caf\303\251\n'")
    assert SlurmRunner(bin_dir).run("squeue", []) == "name\ufffd\ufffd café\n"


def test_an_error_that_is_not_utf8_still_carries_the_message(bin_dir):
    _stub(bin_dir, "sbatch", r"printf 'sbatch: error: bad name \377\n' >&2; exit 1")
    with pytest.raises(SlurmRejected) as error:
        SlurmRunner(bin_dir).run("sbatch", [])
    assert error.value.message == "bad name \ufffd"


def test_stdin_is_sent_as_utf8(bin_dir):
    _stub(bin_dir, "sbatch", "cat")
    assert SlurmRunner(bin_dir).run("sbatch", [], stdin="#!/bin/sh\necho café\n") == "#!/bin/sh\necho café\n"


_SHOW_ENV = 'echo "TZ=$TZ FMT=$SLURM_TIME_FORMAT LANG=$LANG CONF=${SLURM_CONF-unset} SECRET=${SECRET-unset}"'


def test_the_portals_own_commands_get_a_fixed_environment(bin_dir, monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    monkeypatch.setenv("SECRET", "portal-only")
    monkeypatch.setenv("SLURM_CONF", "/etc/other/slurm.conf")
    _stub(bin_dir, "squeue", _SHOW_ENV)
    assert SlurmRunner(bin_dir).run("squeue", []) == (
        "TZ=UTC FMT=%Y-%m-%dT%H:%M:%S LANG=C.UTF-8 CONF=/etc/other/slurm.conf SECRET=unset\n")


def test_commands_as_a_user_get_the_fixed_environment_and_their_own_variables(bin_dir, monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    monkeypatch.setenv("LANG", "de_DE.UTF-8")
    monkeypatch.setenv("SECRET", "portal-only")
    monkeypatch.setenv("DJANGO_SECRET_KEY", "portal-only")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    _stub(bin_dir, "prefix", 'shift; exec "$@"')
    _stub(bin_dir, "sbatch", _SHOW_ENV + '; echo "KEY=${DJANGO_SECRET_KEY-unset} TOKEN=$TOKEN"')
    runner = SlurmRunner(bin_dir, exec_prefix=(str(bin_dir / "prefix"), "{username}"))
    assert runner.run("sbatch", [], as_user="alice", secrets={"TOKEN": "this-job-only"}) == (
        "TZ=UTC FMT=%Y-%m-%dT%H:%M:%S LANG=C.UTF-8 CONF=unset SECRET=unset\n"
        "KEY=unset TOKEN=this-job-only\n")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, process group) of a process, None once it is gone."""
    try:
        # 'pid (comm) state ppid pgrp ...': comm may hold spaces, so split after the last ')'.
        state, _ppid, group = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:3]
    except (OSError, IndexError):
        return None
    return state, int(group)


def _survivors(pids: list[int]) -> list[int]:
    """Those of `pids`, and of their process groups, still running; a zombie is dead (PID 1 here
    reaps orphans only every few seconds)."""
    groups = {stat[1] for stat in map(_stat, pids) if stat}
    everyone = {int(path.name) for path in Path("/proc").iterdir() if path.name.isdigit()}
    return sorted(pid for pid in everyone
                  if (stat := _stat(pid)) and stat[0] != "Z" and (pid in pids or stat[1] in groups))


def _assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 5
    while survivors := _survivors(pids):
        assert time.monotonic() < deadline, f"still running: {survivors}"
        time.sleep(0.05)


@pytest.fixture
def forking_prefix(bin_dir):
    """A prefix that forks the command and waits, as runuser and sudo do, and a command that starts
    a child of its own; each writes its pid down."""
    pids = bin_dir / "pids"
    _stub(bin_dir, "prefix", f'echo "$$" >> {pids}; shift; "$@" & wait')
    _stub(bin_dir, "sbatch", f'sleep 60 & echo "$! $$" >> {pids}; sleep 60')
    runner = SlurmRunner(bin_dir, exec_prefix=(str(bin_dir / "prefix"), "{username}"), timeout=1)
    return runner, pids


def _started(pids: Path) -> list[int]:
    """prefix, the command's child, the command: once all three are up."""
    deadline = time.monotonic() + 5
    while not pids.exists() or len(pids.read_text().split()) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return [int(pid) for pid in pids.read_text().split()]


def test_a_timeout_kills_the_whole_process_group(forking_prefix):
    runner, pids = forking_prefix
    began = time.monotonic()
    with pytest.raises(SlurmUnreachable, match="did not answer"):
        runner.run("sbatch", [], as_user="alice")
    assert time.monotonic() - began < runner.timeout + 3  # not waiting for the command's own end
    _assert_all_gone(_started(pids))


def test_an_interrupted_call_kills_the_whole_process_group(forking_prefix, monkeypatch):
    """E.g. a Celery soft time limit raised while the command runs."""
    runner, pids = forking_prefix

    def interrupted(self, input=None, timeout=None):
        prefix, *rest = _started(pids)
        # A group of its own, led by the prefix: killing it cannot hit the test's processes.
        assert [_stat(pid)[1] for pid in rest] == [prefix, prefix] and prefix != os.getpgid(0)
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.run("sbatch", [], as_user="alice")
    _assert_all_gone(_started(pids))


def test_a_conversation_answers_each_line_in_turn_and_ends_with_its_input(bin_dir):
    _stub(bin_dir, "helper", 'while read -r line; do echo "got $line"; done; echo bye > "$0.ended"')
    runner = SlurmRunner(bin_dir, exec_prefix=(str(bin_dir / "prefix"), "{username}"))
    _stub(bin_dir, "prefix", 'shift; exec "$@"')
    with runner.conversation("helper", [], as_user="alice") as talk:
        assert [talk.ask("one"), talk.ask("two words")] == ["got one", "got two words"]
    assert (bin_dir / "helper.ended").read_text() == "bye\n"  # closing its input ended it


def test_a_conversation_that_does_not_answer_in_time_is_ended(bin_dir):
    pids = bin_dir / "pids"
    _stub(bin_dir, "helper", f'echo "$$" >> {pids}; read -r line; sleep 60')
    runner = SlurmRunner(bin_dir, timeout=0.5)
    began = time.monotonic()
    with runner.conversation("helper", [], as_user=None) as talk, \
            pytest.raises(SlurmTimedOut, match="did not answer"):
        talk.ask("anything")
    assert time.monotonic() - began < 5
    _assert_all_gone([int(pids.read_text())])


def test_a_conversation_that_ends_without_answering_is_unreachable_with_its_message(bin_dir):
    _stub(bin_dir, "helper", "read -r line; echo 'helper: malformed: no' >&2; exit 2")
    with SlurmRunner(bin_dir).conversation("helper", [], as_user=None) as talk, \
            pytest.raises(SlurmUnreachable, match=r"without answering \(exit 2\): helper: malformed"):
        talk.ask("x")


def test_a_conversation_that_ends_after_taking_the_line_leaves_it_uncertain(bin_dir):
    """#32: the helper read the line (its sbatch may have run) and ended without an answer."""
    _stub(bin_dir, "helper", "read -r line; exit 1")
    with SlurmRunner(bin_dir).conversation("helper", [], as_user=None) as talk, \
            pytest.raises(SlurmTimedOut, match="without answering"):
        talk.ask("x")


def test_a_conversation_that_ended_before_the_line_is_only_unreachable(bin_dir):
    _stub(bin_dir, "helper", "exit 1")
    with SlurmRunner(bin_dir).conversation("helper", [], as_user=None) as talk:
        time.sleep(0.5)  # gone before it is asked: the line is never taken
        with pytest.raises(SlurmUnreachable) as raised:
            talk.ask("x")
    assert type(raised.value) is SlurmUnreachable
