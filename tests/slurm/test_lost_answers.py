"""Exactly once at the adapter (#32): an answer lost after Slurm took a request is uncertain
(SlurmTimedOut, looked up by its comment before any retry), never "unreachable, retry"; an answer
that is no job id is uncertain too; and many jobs' accounting is read in chunks, so that a malformed
id or one refused read cannot keep the other jobs from their final state. Stub commands and
recorded answers here; the real cluster is in tests/jobs/test_fencing_real.py."""

from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3

from slurm import adapter
from slurm.adapter import Slurm, accounting_by_id, submitted_job_id
from slurm.errors import SlurmRejected, SlurmTimedOut, SlurmUnreachable
from slurm.parsing import Parsed
from slurm.rest import SlurmRest
from slurm.runner import SlurmRunner, failure
from tests.slurm.test_rest import Tokens
from tests.slurm.test_rest import adapter as rest_adapter


@pytest.mark.parametrize(("stderr", "error"), [
    ("sbatch: error: Batch job submission failed: Socket timed out on send/recv operation", SlurmTimedOut),
    ("sbatch: error: slurm_receive_msg: Zero Bytes were transmitted or received", SlurmTimedOut),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (receive failure)",
     SlurmTimedOut),
    ("sbatch: error: slurm_receive_msg: Message receive failure", SlurmTimedOut),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
     SlurmUnreachable),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (send failure)",
     SlurmUnreachable),
    ("sbatch: error: slurm_persist_conn_open_without_init: failed to open persistent connection: "
     "Connection refused", SlurmUnreachable),
    ("sbatch: error: Batch job submission failed: Requested node configuration is not available",
     SlurmRejected),
])
def test_what_a_failed_command_means(stderr, error):
    assert type(failure("sbatch", stderr, 1)) is error


@pytest.mark.parametrize(("answer", "job_id"), [("12", "12"), ("12;cluster-a", "12"), ("9007;c.b_2", "9007")])
def test_sbatchs_parsable_answer_is_the_job_id(answer, job_id):
    assert submitted_job_id(answer, source="sbatch") == job_id


@pytest.mark.parametrize("answer", ["", "12a", "0", "Submitted batch job 12", "12_3", "-1", "1" * 17, "12;",
                                    "4294967299", "4294967294",
                                    "12;a b", "x;12", "12\n13", ";12"])
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
    (500, {"errors": [{"error_number": 5005}]}, SlurmTimedOut),  # by its number alone
    (500, {"errors": []}, SlurmTimedOut),  # failed without saying why
    (500, {"errors": [{"error": "Unable to contact slurm controller (connect failure)",
                       "error_number": 1800}]}, SlurmUnreachable),  # never sent on
    # slurmrestd 22.05 answers Slurm's refusal with a 500 too: it is final, not uncertain.
    (500, {"errors": [{"error": "Invalid partition name specified", "error_number": 2000}]},
     SlurmRejected),
])
def test_slurmrestd_losing_a_submissions_answer_leaves_it_uncertain(status, body, error):
    rest, _ = rest_adapter((status, body))
    with pytest.raises(error):
        rest.submit(script="#!/bin/bash\ntrue\n", user="alice", comment="c")


class Dropping:
    """A requests.Session stand-in whose connection fails as `error` says."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def request(self, method: str, url: str, **kwargs: Any) -> None:
        raise self.error


@pytest.mark.parametrize(("error", "expected"), [
    # Dropped after the request went out: slurmrestd may have made the job.
    (requests.ConnectionError(urllib3.exceptions.ProtocolError("Connection aborted.")), SlurmTimedOut),
    (requests.ConnectionError(urllib3.exceptions.MaxRetryError(None, "/", "Connection refused")),
     SlurmUnreachable),
])
def test_a_submission_whose_connection_drops_after_sending_is_uncertain(error, expected):
    rest = SlurmRest(runner=SlurmRunner(bin_dir=Path("/usr/bin"), timeout=7), tokens=Tokens(),
                     session=Dropping(error))  # type: ignore[arg-type]
    with pytest.raises(SlurmUnreachable) as raised:
        rest.submit(script="#!/bin/bash\ntrue\n", user="alice", comment="c")
    assert type(raised.value) is expected
    with pytest.raises(SlurmUnreachable) as raised:  # a read is only ever retried
        rest.queue()
    assert type(raised.value) is SlurmUnreachable


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

    parsed = accounting_by_id(["10", "11", "bad;id", "12_3", "13", "4294967299", "4294967299_1", "14", "10"],
                              read)
    # The refused read is halved until the id Slurm refuses is alone.
    assert asked == [["10", "11"], ["12_3", "13"], ["12_3"], ["13"], ["14"]]
    assert parsed.rows == ["row 10", "row 11", "row 12_3", "row 14"]
    assert parsed.malformed == 4  # the malformed ids (sacct reads 4294967299 as job 3), and the refused one


def test_one_refused_id_among_many_costs_a_few_reads_and_only_itself(monkeypatch):
    asked: list[list[str]] = []

    def read(chunk: list[str]) -> Parsed[str]:
        asked.append(chunk)
        if "377" in chunk:
            raise SlurmRejected("sacct: error: Invalid job id")
        return Parsed(rows=list(chunk))

    ids = [str(job_id) for job_id in range(1, 1001)]
    parsed = accounting_by_id(ids, read)
    assert sorted(parsed.rows, key=int) == [job_id for job_id in ids if job_id != "377"]
    assert parsed.malformed == 1
    assert len(asked) <= 5 + 2 * 8  # 5 chunks of 200, and two reads per halving of the bad one


def test_accounting_stops_when_slurm_is_unreachable():
    def read(chunk: list[str]) -> Parsed[str]:
        raise SlurmUnreachable("Unable to contact slurm controller")

    with pytest.raises(SlurmUnreachable):
        accounting_by_id(["10"], read)


def test_accounting_of_no_jobs_asks_nothing(tmp_path: Path):
    assert Slurm(SlurmRunner(bin_dir=tmp_path)).accounting(job_ids=[]).rows == []
