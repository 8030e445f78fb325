"""The Slurm adapter against the real local cluster."""

import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.parsing import Parsed
from slurm.rest import SlurmRest
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = pytest.mark.integration


def test_nodes_show_both_partitions_with_four_gpus(slurm):
    parsed = slurm.nodes()
    assert parsed.malformed == 0
    rows = {row.partition: row for row in parsed.rows}
    assert set(rows) >= {"gpu", "debug"}
    assert rows["gpu"].is_default_partition and not rows["debug"].is_default_partition
    assert rows["gpu"].gpus == {"a100": 4}
    assert rows["gpu"].partition_max_time is None
    assert rows["debug"].partition_max_time.total_seconds() == 3600
    assert rows["gpu"].cpus_total >= 32 and rows["gpu"].memory_mb >= 4 * 48 * 1000


def test_queue_parses(slurm):
    parsed = slurm.queue()
    assert isinstance(parsed, Parsed) and parsed.malformed == 0


def test_stopped_slurmctld_is_unreachable(slurm, slurmctld_stopped):
    with pytest.raises(SlurmUnreachable):
        slurm.queue()
    with pytest.raises(SlurmUnreachable):
        slurm.nodes()


def test_submit_as_user_then_accounting_and_cancel(slurm, monkeypatch):
    # Whatever zone the portal runs in (here UTC-8), Slurm's timestamps come back as UTC and
    # `since` is read as UTC.
    monkeypatch.setenv("TZ", "PST8")
    comment = f"gpuportal:{uuid.uuid4()}"
    script = "#!/bin/bash\n#SBATCH --time=1\n#SBATCH --mem=100M\n#SBATCH --output=/dev/null\nsleep 60\n"
    job_id = slurm.submit(script=script, user="alice", comment=comment)
    try:
        assert job_id.isdigit()
        (queued,) = [job for job in slurm.queue().rows if job.job_id == job_id]
        assert queued.user == "alice" and queued.comment == comment
    finally:
        slurm.cancel(job_id=job_id, user="alice")
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:
        rows = slurm.accounting(job_ids=[job_id]).rows
        if rows and rows[0].end_time is not None:
            break
        assert time.monotonic() < deadline
        time.sleep(0.5)
    # Comment with AccountingStoreFlags=job_comment; SubmitLine (filled once the job started) without.
    assert rows[0].base_state == "CANCELLED" and comment in rows[0].comment + rows[0].submit_line
    assert abs(rows[0].submit_time - datetime.now(UTC)) < timedelta(minutes=2)
    # A time-window query can miss a job that ended in the same second: ask until it is there.
    since = rows[0].submit_time - timedelta(seconds=1)
    while job_id not in {row.job_id for row in slurm.accounting(since=since, users=["alice"]).rows}:
        assert time.monotonic() < deadline + SLURM_PATIENCE
        time.sleep(0.5)


def test_accounting_refuses_a_naive_since(slurm):
    with pytest.raises(ValueError, match="timezone-aware"):
        slurm.accounting(since=datetime.now())


def test_sbatch_rejection_carries_slurms_message(slurm):
    script = "#!/bin/bash\n#SBATCH --gres=gpu:5\n#SBATCH --time=1\ntrue\n"
    with pytest.raises(SlurmRejected, match="Requested node configuration is not available"):
        slurm.submit(script=script, user="alice", comment="gpuportal:reject-test")


def _held_job_as_alice(*options: bytes) -> str:
    """sbatch with raw bytes in argv, as any user on a login node could."""
    argv = [b"/usr/sbin/runuser", b"-u", b"alice", b"--", b"/usr/bin/sbatch", b"--parsable", b"--hold",
            b"--time=1", b"--mem=100M", b"--output=/dev/null", *options, b"--wrap", b"sleep 60"]
    done = subprocess.run(argv, capture_output=True, check=True, cwd="/tmp", timeout=20)
    return done.stdout.decode().strip()


def test_a_hostile_job_name_and_comment_hide_no_other_job(slurm):
    name = b"evil\nname\x1fwith\x1f\x1fseparators"
    hostile = _held_job_as_alice(b"--job-name=" + name, b"--comment=bad\xff\xfe")
    try:
        normal = _held_job_as_alice(b"--job-name=normal", b"--comment=adapter-test:normal")
        try:
            parsed = slurm.queue()
            jobs = {job.job_id: job for job in parsed.rows}
            assert parsed.malformed == 0
            assert (jobs[normal].name, jobs[normal].comment, jobs[normal].user) == (
                "normal", "adapter-test:normal", "alice")
            # The per-call delimiter keeps even this row whole; undecodable bytes are replaced.
            assert jobs[hostile].name == name.decode()
            assert jobs[hostile].comment == "bad\ufffd\ufffd" and jobs[hostile].state == "PENDING"

            # slurmdbd learns of new jobs a moment later.
            deadline = time.monotonic() + SLURM_PATIENCE
            while len((accounted := slurm.accounting(job_ids=[hostile, normal])).rows) < 2:
                assert time.monotonic() < deadline
                time.sleep(0.5)
            assert accounted.malformed == 0
            rows = {row.job_id: row for row in accounted.rows}
            if isinstance(slurm, SlurmRest):
                # slurmdb v0.0.38 has no SubmitLine (and a held job's comment is not stored yet).
                assert (rows[hostile].user, rows[normal].user) == ("alice", "alice")
            else:
                assert name.decode() in rows[hostile].submit_line
                assert "--job-name=normal" in rows[normal].submit_line
        finally:
            slurm.cancel(job_id=normal, user="alice")
    finally:
        slurm.cancel(job_id=hostile, user="alice")


def _job_script(name: str, output: str, options: str, command: str) -> str:
    """A one-minute job of alice's, in her home, its output to `output`, saying it all in #SBATCH lines."""
    return (f"#!/bin/bash\n#SBATCH --job-name={name} --time=1\n#SBATCH --mem=100M\n"
            f"#SBATCH --chdir=/home/alice --output={output} {options}\n{command}\n")


def test_a_job_runs_with_its_scripts_options_and_the_given_environment(slurm):
    # The portal's jobs say everything in #SBATCH lines (slurmrestd reads none: slurm/rest.py maps them).
    tag = uuid.uuid4().hex[:8]
    output = f"/home/alice/.adapter-test-{tag}.out"
    script = _job_script(f"adapter-{tag}", output, f"--error={output}",
                         'echo "dir=$(pwd) user=$(id -un) name=$SLURM_JOB_NAME url=$GPUPORTAL_URL"')
    job_id = slurm.submit(script=script, user="alice", comment=f"gpuportal:{tag}",
                          environment={"GPUPORTAL_URL": "http://portal.test"})
    try:
        deadline = time.monotonic() + SLURM_PATIENCE
        while not (rows := slurm.accounting(job_ids=[job_id]).rows) or rows[0].end_time is None:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert rows[0].base_state == "COMPLETED" and rows[0].exit_code == 0
        printed = Path(output).read_text()
        assert printed == f"dir=/home/alice user=alice name=adapter-{tag} url=http://portal.test\n"
    finally:
        Path(output).unlink(missing_ok=True)


def test_a_submitter_takes_several_jobs_answers_each_and_goes_on_after_a_refusal(slurm):
    # On the command path one sudo runs deploy/libexec/sbatch-batch for all of them.
    tag = uuid.uuid4().hex[:8]
    output = f"/home/alice/.adapter-batch-{tag}.out"
    good = _job_script(f"batch-{tag}", output, "--open-mode=append",
                       'echo "user=$(id -un) token=$GPUPORTAL_REPORT_TOKEN"')
    refused = "#!/bin/bash\n#SBATCH --gres=gpu:5\n#SBATCH --time=1\ntrue\n"
    answers: list[str | Exception] = []
    with slurm.submitter(user="alice", jobs=3) as submit:
        for n, script in enumerate([good, refused, good]):
            try:
                answers.append(submit(script=script, comment=f"gpuportal:{tag}-{n}",
                                      environment={"GPUPORTAL_REPORT_TOKEN": f"t{n}"}))
            except SlurmRejected as error:
                answers.append(error)
    first, second, third = answers
    assert isinstance(second, SlurmRejected) and "Requested node configuration" in second.message
    try:
        queued = {job.job_id: job for job in slurm.queue(finished=True).rows}
        assert (queued[first].comment, queued[third].comment) == (f"gpuportal:{tag}-0", f"gpuportal:{tag}-2")
        assert queued[first].user == queued[third].user == "alice"
        deadline = time.monotonic() + SLURM_PATIENCE
        while not Path(output).exists() or len(Path(output).read_text().splitlines()) < 2:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert sorted(Path(output).read_text().splitlines()) == ["user=alice token=t0", "user=alice token=t2"]
    finally:
        for job_id in (first, third):
            slurm.cancel(job_id=job_id, user="alice")
        Path(output).unlink(missing_ok=True)


def test_the_operator_raises_a_time_limit(slurm):
    script = "#!/bin/bash\n#SBATCH --hold --time=1 --mem=100M --output=/dev/null\nsleep 60\n"
    job_id = slurm.submit(script=script, user="alice", comment="adapter-test:limit")
    try:
        slurm.time_limit_set(job_id=job_id, minutes=30)
        (queued,) = [job for job in slurm.queue().rows if job.job_id == job_id]
        assert queued.time_limit == timedelta(minutes=30) and queued.reason == "JobHeldUser"
    finally:
        slurm.cancel_as_operator(job_id=job_id)
    with pytest.raises(SlurmRejected):
        slurm.time_limit_set(job_id="999999", minutes=30)
