"""The runner against stub Slurm commands (batchspawner's pattern); the real thing is in
test_adapter_real.py."""

from pathlib import Path

import pytest

from slurm.errors import SlurmRejected, SlurmUnreachable
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

