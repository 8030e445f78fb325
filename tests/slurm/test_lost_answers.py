"""Exactly once at the adapter (#32): an answer lost after Slurm took a request is uncertain
(SlurmTimedOut, looked up by its comment before any retry), never "unreachable, retry"; an answer
that is no job id is uncertain too; and many jobs' accounting is read in chunks, so that a malformed
id or one refused read cannot keep the other jobs from their final state. Stub commands and
recorded answers here; the real cluster is in tests/jobs/test_fencing_real.py."""

from pathlib import Path

import pytest

from slurm import adapter
from slurm.adapter import Slurm, accounting_by_id, submitted_job_id
from slurm.errors import SlurmRejected, SlurmTimedOut, SlurmUnreachable
from slurm.parsing import Parsed
from slurm.runner import SlurmRunner, failure
from tests.slurm.test_rest import adapter as rest_adapter


@pytest.mark.parametrize(("stderr", "error"), [
    ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", SlurmTimedOut),
    ("sbatch: error: slurm_receive_msg: Zero Bytes were transmitted or received", SlurmTimedOut),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
     SlurmUnreachable),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available",
     SlurmRejected),
])
def test_what_a_failed_command_means(stderr, error):
    assert type(failure("sbatch", stderr, 1)) is error


@pytest.mark.parametrize("answer", ["", "12a", "0", "Submitted batch job 12", "12_3", "-1", "1" * 17])
def test_an_answer_that_is_no_job_id_is_uncertain(answer):
    with pytest.raises(SlurmTimedOut, match="not a job id"):
        submitted_job_id(answer, source="sbatch")


def test_sbatch_printing_no_job_id_leaves_the_job_uncertain(tmp_path):
    stub = tmp_path / "sbatch"
    stub.write_text("#!/bin/sh\ncat >/dev/null\necho 'Submitted batch job 42'\n")
    stub.chmod(0o755)
    with pytest.raises(SlurmTimedOut, match="sbatch answered what is not a job id"):
        Slurm(SlurmRunner(bin_dir=tmp_path)).submit(script="#!/bin/sh\n", user="alice", comment="c")


@pytest.mark.parametrize(("status", "body", "error"), [
    (502, "<html>Bad Gateway</html>", SlurmTimedOut),  # took it, failed without saying how
    (200, {"job_id": "42x"}, SlurmTimedOut),
    (200, {"errors": []}, SlurmTimedOut),  # accepted, no id
    (500, {"errors": [{"error": "Socket timed out on send/recv operation", "error_number": 5004}]},
     SlurmTimedOut),
])
def test_slurmrestd_losing_a_submissions_answer_leaves_it_uncertain(status, body, error):
    rest, _ = rest_adapter((status, body))
    with pytest.raises(error):
        rest.submit(script="#!/bin/bash\ntrue\n", user="alice", comment="c")


def test_a_5xx_without_slurms_answer_on_a_read_stays_unreachable():
    rest, _ = rest_adapter((502, "<html>Bad Gateway</html>"))
    with pytest.raises(SlurmUnreachable) as raised:
        rest.queue()
    assert type(raised.value) is SlurmUnreachable


def test_accounting_skips_malformed_ids_and_reads_the_rest_in_chunks(monkeypatch):
    monkeypatch.setattr(adapter, "ACCOUNTING_CHUNK", 2)
    asked: list[list[str]] = []

    def read(chunk: list[str]) -> Parsed[str]:
        asked.append(chunk)
        if "13" in chunk:
            raise SlurmRejected("sacct: error: Invalid job id")
        return Parsed(rows=[f"row {job_id}" for job_id in chunk])

    parsed = accounting_by_id(["10", "11", "bad;id", "12_3", "13", "14", "10"], read)
    assert asked == [["10", "11"], ["12_3", "13"], ["14"]]
    assert parsed.rows == ["row 10", "row 11", "row 14"]
    assert parsed.malformed == 3  # the bad id, and the two jobs of the refused read


def test_accounting_stops_when_slurm_is_unreachable():
    def read(chunk: list[str]) -> Parsed[str]:
        raise SlurmUnreachable("Unable to contact slurm controller")

    with pytest.raises(SlurmUnreachable):
        accounting_by_id(["10"], read)


def test_accounting_of_no_jobs_asks_nothing(tmp_path: Path):
    assert Slurm(SlurmRunner(bin_dir=tmp_path)).accounting(job_ids=[]).rows == []
