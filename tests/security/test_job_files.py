"""(d) The job-files helper, run as the user the way the portal runs it, and the adapter and log
service on top of it (slurm/user_files.py, portal/jobs/services/logs.py)."""

import os
import pwd
import time
import uuid
from pathlib import Path

import pytest

from portal.core.errors import Conflict
from portal.jobs.services.logs import job_log_read
from slurm.adapter import Slurm
from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.runner import SlurmRunner
from slurm.user_files import JOB_FILES, OutputUnsafe, job_output_dir_create, job_output_read
from tests.factories import JobFactory, UserFactory
from tests.security.conftest import AS_PORTAL, PORTAL_SUDO, alice_file, job_files_as, new_uuid, run
from tests.slurm_waits import SLURM_PATIENCE

# The runner exactly as the portal's processes have it: their account, then SLURM_EXEC_PREFIX.
RUNNER = SlurmRunner(bin_dir=JOB_FILES.parent, exec_prefix=(*AS_PORTAL, *PORTAL_SUDO), timeout=20)


# --- the helper itself ---

@pytest.mark.parametrize("args", [
    ["read", "../../../etc/passwd", "out", "0", "10"],
    ["read", "x/../../" + new_uuid(), "out", "0", "10"],
    ["read", new_uuid().upper(), "out", "0", "10"],
    ["read", new_uuid() + "/", "out", "0", "10"],
    ["read", new_uuid(), "../out", "0", "10"],
    ["read", new_uuid(), "log", "0", "10"],
    ["read", new_uuid(), "metrics.json", "0", "10"],
    ["read", new_uuid(), "../metrics", "0", "10"],
    ["read", new_uuid(), "out", "-1", "10"],
    ["read", new_uuid(), "out", "0", "0"],
    ["read", new_uuid(), "out", "0", str(16 * 1024 * 1024 + 1)],
    ["read", new_uuid(), "out", str(2**62 + 1), "10"],
    ["read", new_uuid(), "out", "1e3", "10"],
    ["read", new_uuid(), "out", "0", "10", "extra"],
    ["mkdir", "/tmp/elsewhere"],
    ["cat", "/etc/passwd"],
    [],
])
def test_refuses_bad_arguments(args):
    result = job_files_as("alice", *args)
    assert result.returncode == 2 and result.stdout == b""
    assert result.stderr.startswith(b"job-files: usage:")


def test_refuses_a_symlinked_output_file(alice_jobs):
    job = new_uuid()
    link = alice_jobs / f"job-{job}.out"
    link.symlink_to("/etc/passwd")
    os.lchown(link, pwd.getpwnam("alice").pw_uid, -1)
    result = job_files_as("alice", "read", job, "out", "0", "4096")
    assert result.returncode == 3 and result.stdout == b""
    assert result.stderr.startswith(b"job-files: unsafe:")


def test_refuses_a_file_of_somebody_else_and_anything_not_a_regular_file(alice_jobs):
    foreign, fifo, directory = new_uuid(), new_uuid(), new_uuid()
    (alice_jobs / f"job-{foreign}.out").write_text("root's")  # owned by root
    os.mkfifo(alice_jobs / f"job-{fifo}.out")
    os.chown(alice_jobs / f"job-{fifo}.out", pwd.getpwnam("alice").pw_uid, -1)
    (alice_jobs / f"job-{directory}.err").mkdir()
    os.chown(alice_jobs / f"job-{directory}.err", pwd.getpwnam("alice").pw_uid, -1)
    for job, stream in ((foreign, "out"), (fifo, "out"), (directory, "err")):
        started = time.monotonic()
        result = job_files_as("alice", "read", job, stream, "0", "10")
        assert result.returncode == 3 and result.stdout == b"", result.stderr
        assert time.monotonic() - started < 10  # a FIFO is never waited on


def test_reads_byte_ranges_of_a_real_output_file(alice_jobs):
    job = new_uuid()
    content = "héllo\nworld\n".encode()
    alice_file(alice_jobs, f"job-{job}.err", content)
    whole = job_files_as("alice", "read", job, "err", "0", "65536")
    assert whole.returncode == 0 and whole.stdout == b"size 13\n" + content
    assert job_files_as("alice", "read", job, "err", "1", "2").stdout == b"size 13\n" + "é".encode()
    assert job_files_as("alice", "read", job, "err", "999", "10").stdout == b"size 13\n"
    assert job_files_as("alice", "read", job, "out", "0", "10").stdout == b"absent\n"


def test_reads_the_metrics_file_with_the_same_checks(alice_jobs):
    job, link = new_uuid(), new_uuid()
    alice_file(alice_jobs, f"job-{job}.metrics.json", b'{"series": []}')
    assert job_files_as("alice", "read", job, "metrics", "0", "100").stdout == b'size 14\n{"series": []}'
    assert job_files_as("alice", "read", new_uuid(), "metrics", "0", "10").stdout == b"absent\n"
    (alice_jobs / f"job-{link}.metrics.json").symlink_to("/etc/shadow")
    result = job_files_as("alice", "read", link, "metrics", "0", "10")
    assert result.returncode == 3 and result.stdout == b""
    output = job_output_read(user="alice", job_uuid=uuid.UUID(job), stream="metrics", offset=0, limit=100,
                             runner=RUNNER)
    assert (output.exists, output.data) == (True, b'{"series": []}')


def test_a_user_cannot_read_another_users_output_through_it(alice_jobs):
    job = new_uuid()
    alice_file(alice_jobs, f"job-{job}.out", b"alice's secret")
    # bob's helper looks in bob's home only; there is no argument to point it elsewhere.
    assert job_files_as("bob", "read", job, "out", "0", "100").stdout == b"absent\n"


def test_mkdir_creates_a_private_jobs_dir_as_the_user():
    account = pwd.getpwnam("ada")
    top = Path(account.pw_dir) / "gpuportal"
    existed = top.exists()
    result = job_files_as("ada", "mkdir")
    assert result.returncode == 0, result.stderr
    jobs = top / "jobs"
    assert jobs.is_dir() and jobs.stat().st_uid == account.pw_uid
    if not existed:
        # Nobody else may list either; the job files' directory is the owner's alone.
        assert top.stat().st_mode & 0o066 == 0 and jobs.stat().st_mode & 0o777 == 0o700


def test_refuses_to_run_as_root():
    result = run([str(JOB_FILES), "read", new_uuid(), "out", "0", "10"])
    assert result.returncode == 3 and b"not for root" in result.stderr


# --- slurm/user_files.py ---

def test_adapter_reads_and_reports_size(alice_jobs):
    job = uuid.uuid4()
    alice_file(alice_jobs, f"job-{job}.out", b"\x00\xffbinary\n")
    output = job_output_read(user="alice", job_uuid=job, stream="stdout", offset=1, limit=3, runner=RUNNER)
    assert (output.exists, output.size, output.data) == (True, 9, b"\xffbi")
    absent = job_output_read(user="alice", job_uuid=job, stream="stderr", offset=0, limit=3, runner=RUNNER)
    assert (absent.exists, absent.size, absent.data) == (False, 0, b"")


def test_adapter_raises_output_unsafe_for_a_link(alice_jobs):
    job = uuid.uuid4()
    (alice_jobs / f"job-{job}.out").symlink_to("/etc/shadow")
    with pytest.raises(OutputUnsafe):
        job_output_read(user="alice", job_uuid=job, stream="stdout", offset=0, limit=10, runner=RUNNER)


def test_adapter_for_somebody_sudo_refuses_is_a_rejection_not_unsafe():
    with pytest.raises(SlurmRejected) as raised:
        job_output_read(user="eve", job_uuid=uuid.uuid4(), stream="stdout", offset=0, limit=10, runner=RUNNER)
    assert not isinstance(raised.value, OutputUnsafe)
    with pytest.raises(ValueError, match="not a Unix user name"):
        job_output_dir_create(user="alice; id", runner=RUNNER)


def test_a_timed_out_command_run_through_sudo_is_ended_too():
    """The portal's account may signal sudo but not the user's process: sudo relays SIGTERM."""
    name = f"sec-timeout-{uuid.uuid4().hex[:8]}"
    runner = SlurmRunner(bin_dir=Path("/usr/bin"), exec_prefix=(*AS_PORTAL, *PORTAL_SUDO), timeout=2)
    try:
        with pytest.raises(SlurmUnreachable):
            runner.run("sbatch", ["--wait", "--job-name", name, "--time=2", "-o", "/dev/null",
                                  "--wrap", "sleep 60"], as_user="alice")
        time.sleep(0.5)
        left = run(["pgrep", "-u", "alice", "-f", f"sbatch --wait --job-name {name}"])
        assert left.stdout == b"", "sbatch as alice outlived the timeout"
    finally:
        run(["scancel", "--name", name])


# --- the log service on top (LogChunk and its UTF-8 cut, as before) ---

@pytest.mark.django_db
def test_log_chunks_offsets_and_utf8_cut(alice_jobs, settings):
    job = JobFactory(user=UserFactory(username="alice"), state="RUNNING")
    alice_file(alice_jobs, f"job-{job.uuid}.out", "héllo\nworld\n".encode())
    chunk = job_log_read(job=job, stream="stdout")
    assert (chunk.text, chunk.offset, chunk.next_offset, chunk.size, chunk.exists, chunk.complete) == (
        "héllo\nworld\n", 0, 13, 13, True, False)
    settings.JOBS_LOG_CHUNK_BYTES = 2
    assert job_log_read(job=job, stream="stdout", offset=1).text == "é"
    cut = job_log_read(job=job, stream="stdout", offset=0)
    assert (cut.text, cut.next_offset) == ("h", 1)
    assert job_log_read(job=job, stream="stderr").exists is False


@pytest.mark.django_db
def test_log_refuses_symlinks_and_files_of_others(alice_jobs):
    job = JobFactory(user=UserFactory(username="alice"), state="COMPLETED")
    (alice_jobs / f"job-{job.uuid}.out").symlink_to("/etc/shadow")
    (alice_jobs / f"job-{job.uuid}.err").write_text("root's file")
    for stream in ("stdout", "stderr"):
        with pytest.raises(Conflict) as raised:
            job_log_read(job=job, stream=stream)
        assert raised.value.code == "log_unavailable" and "cannot be read safely" in raised.value.message


# --- a real job, submitted and read back the way the portal's processes do it ---

@pytest.mark.integration
def test_a_real_job_output_is_read_and_the_job_does_not_inherit_the_portals_secrets(alice_jobs, monkeypatch):
    monkeypatch.setenv("DJANGO_SECRET_KEY", "must-not-reach-the-job-" + uuid.uuid4().hex)
    slurm = Slurm(SlurmRunner(bin_dir=Path("/usr/bin"), exec_prefix=(*AS_PORTAL, *PORTAL_SUDO), timeout=20))
    job = uuid.uuid4()
    script = (f"#!/bin/bash\n#SBATCH --job-name=sec-read\n#SBATCH --time=2\n#SBATCH --mem=100M\n"
              f"#SBATCH --chdir={alice_jobs}\n#SBATCH --output={alice_jobs}/job-{job}.out\n"
              f"#SBATCH --error={alice_jobs}/job-{job}.err\n"
              "echo \"hello from $(id -un)\"\nenv | sort\n")
    job_id = slurm.submit(script=script, user="alice", comment=f"gpuportal:{job}")
    try:
        deadline = time.monotonic() + SLURM_PATIENCE
        while run(["squeue", "-h", "-j", job_id]).stdout.strip() and time.monotonic() < deadline:
            time.sleep(0.5)
        output = job_output_read(user="alice", job_uuid=job, stream="stdout", offset=0, limit=65536,
                                 runner=RUNNER)
    finally:
        run(["scancel", job_id])
    text = output.data.decode()
    assert output.exists and output.size == len(output.data) and text.startswith("hello from alice\n")
    assert "SUDO_USER=gpuportal" in text  # it went through the portal's account and sudo
    assert "DJANGO_SECRET_KEY" not in text and "must-not-reach-the-job" not in text
