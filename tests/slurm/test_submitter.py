"""Slurm.submitter's command path with the sbatch-batch helper stubbed: how its answers read. The real
helper, through sudo, against the bed: tests/slurm/test_adapter_real.py."""

import pytest

from slurm.adapter import Slurm
from slurm.errors import SlurmRejected, SlurmTimedOut
from slurm.runner import SlurmRunner


def _slurm(tmp_path, monkeypatch, body: str) -> Slurm:
    helper = tmp_path / "sbatch-batch"
    helper.write_text(f"#!/bin/sh\n{body}\n")
    helper.chmod(0o755)
    monkeypatch.setattr("slurm.adapter.SBATCH_BATCH", helper)
    return Slurm(SlurmRunner(tmp_path, exec_prefix=(), timeout=5))


def test_answers_are_job_ids_or_slurms_refusals(tmp_path, monkeypatch):
    refusal = "sbatch: error: Batch job submission failed: Invalid partition name specified"
    slurm = _slurm(tmp_path, monkeypatch, f"""read -r a; echo '{{"job_id": "41"}}'
read -r b; echo '{{"status": 1, "stderr": "{refusal}"}}'""")
    with slurm.submitter(user="alice", jobs=2) as submit:
        assert submit(script="#!/bin/bash\n", comment="c1") == "41"
        with pytest.raises(SlurmRejected, match=r"^Batch job submission failed: Invalid partition name"):
            submit(script="#!/bin/bash\n", comment="c2")


@pytest.mark.parametrize("garbage", ["not json", "5", '"text"', '{"status": "x"}', '{"status": 1}'])
def test_an_answer_it_cannot_read_leaves_the_job_uncertain(tmp_path, monkeypatch, garbage):
    slurm = _slurm(tmp_path, monkeypatch, f"read -r a; echo '{garbage}'; read -r b")
    with slurm.submitter(user="alice", jobs=2) as submit, \
            pytest.raises(SlurmTimedOut, match="answered what it should not"):
        submit(script="", comment="c")
