"""`gpuportal jobstats ID` against the live portal: the job, a bar per resource and the notes, as
Princeton's jobstats lays them out; --json as the API answers; a job without figures yet is a
conflict (exit 7)."""

from datetime import timedelta

from django.utils import timezone

from gpuportal_cli.client import Exit
from gpuportal_cli.efficiency import clock, meter
from portal.jobs.models import JobState
from tests.efficiency.records import efficiency_record, wasteful_job_record
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory


def test_meter_and_clock():
    assert meter(0.25, width=20) == "[|||||            25%]"
    assert meter(0.0, width=10) == "[        0%]"
    assert meter(1.0, width=10) == "[||||| 100%]"
    assert meter(None, width=10) == "[   unknown]"
    assert (clock(20 * 60), clock(26 * 3600 + 61), clock(None)) == ("00:20:00", "1-02:01:01", "unknown")


def test_the_wasteful_job(token_cli, alice):
    job = JobFactory(user=alice, slurm_job_id="4242", name="train")
    wasteful_job_record(job)
    done = token_cli("jobstats", str(job.pk))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].strip() == "Slurm Job Statistics"
    header = {line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip() for line in lines[3:16]}
    assert header | {"End Time": ""} == {
        "Job ID": "4242", "Portal job": str(job.pk), "User": "alice", "Job Name": "train",
        "State": "COMPLETED", "Partition": "gpu", "Nodes": "1", "CPU Cores": "4", "CPU Memory": "16GB",
        "GPUs": "2", "End Time": "", "Run Time": "00:20:00", "Time Limit": "01:00:00"}
    utilisation = {line[2:19].strip(): line[19:] for line in lines if line.startswith("  ") and "[" in line}
    cpu = utilisation["CPU utilization"]
    assert cpu.startswith("[||||||||||||") and cpu.endswith(" 25%]")
    assert utilisation["CPU memory usage"].endswith(" 1%]")
    assert utilisation["GPU utilization"].endswith(" 0%]")
    assert utilisation["Time used"].endswith(" 33%]")
    notes = lines[lines.index(next(line for line in lines if line.strip() == "Notes")) + 2:]
    assert len(notes) == 4 and all(note.startswith("  * ") for note in notes)
    assert "--mem=1G" in notes[1] and "--gpus=1" in notes[2] and "--time=00:30:00" in notes[3]

    by_slurm = token_cli("jobstats", "4242")
    assert by_slurm.returncode == 0 and by_slurm.stdout == done.stdout
    as_json = token_cli("jobstats", str(job.pk), "--json").json()
    assert as_json["cpu"]["efficiency"] == 0.25 and len(as_json["advice"]) == 4


def test_efficient_work_a_session_and_no_figures_yet(token_cli, alice):
    job = JobFactory(user=alice)
    efficiency_record(job=job)
    done = token_cli("jobstats", str(job.pk))
    assert done.returncode == 0 and "  * It used what it asked for: no advice." in done.stdout

    session = SessionFactory(user=alice, name="nb", gpus=0,
                                    ended_at=timezone.now() - timedelta(hours=1))
    efficiency_record(session=session, gpus=0, gpus_busy=None, gpu_util_percent=None)
    shown = token_cli("jobstats", "--session", "nb")
    assert shown.returncode == 0, shown.stderr
    assert "Session: nb" in shown.stdout and "GPU utilization" not in shown.stdout

    running = JobFactory(user=alice, state=JobState.RUNNING)
    early = token_cli("jobstats", str(running.pk))
    assert early.returncode == Exit.CONFLICT and "has not ended" in early.stderr
    assert token_cli("jobstats").returncode == Exit.USAGE
    assert token_cli("jobstats", "999999").returncode == Exit.NOT_FOUND
