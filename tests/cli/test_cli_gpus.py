"""`gpuportal gpu job ID` and `gpuportal gpu session NAME` against the live portal: the summary and a
line per GPU (last sample, mean, a sparkline of the recent minutes), --json as the API answers."""

import time
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from gpuportal_cli.client import Exit
from gpuportal_cli.gpus import sparkline
from portal.gpus.services import GpuSample, gpu_samples_record, session_gpu_samples_record
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

T0 = (int(time.time()) // 60 - 5) * 60


def test_sparkline_blocks():
    assert sparkline([0, 50, 100, None, 12.5]) == "▁▅█ ▂"


def test_a_jobs_gpus(token_cli, alice):
    job = JobFactory(user=alice, state=JobState.RUNNING, gpus_per_node=2)
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(hours=1))
    gpu_samples_record(job_id=job.pk, samples=[
        GpuSample(t=T0 + 1, gpu=0, util=0, mem_util=0, mem_used_mib=10, power_w=50),
        GpuSample(t=T0 + 61, gpu=0, util=100, mem_util=40, mem_used_mib=20480, power_w=300),
        GpuSample(t=T0 + 61, gpu=1, util=50, mem_util=5, mem_used_mib=1024, power_w=100)])
    done = token_cli("gpu", "job", str(job.pk))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"Job {job.pk}: utilisation mean 50.0 %, max 100 % · peak memory 20480 MiB")
    assert "3 samples" in lines[0]
    # Not a terminal: a header line and a tab-separated line per GPU.
    assert lines[1].split("\t") == ["GPU", "UTIL", "MEM UTIL", "MEM USED", "POWER", "AS OF", "MEAN",
                                    "LAST 30 MIN"]
    gpu0 = lines[2].split("\t")
    assert gpu0[:4] == ["0", "100 %", "40 %", "20480 MiB"] and gpu0[-2:] == ["50.0 %", "▁█"]
    gpu1 = lines[3].split("\t")
    assert gpu1[:2] == ["1", "50 %"] and gpu1[-1] == "▅"

    as_json = token_cli("gpu", "job", str(job.pk), "--json").json()
    assert as_json["summary"]["samples"] == 3 and [s["gpu"] for s in as_json["series"]] == [0, 1]
    missing = token_cli("gpu", "job", "999999")
    assert missing.returncode == Exit.NOT_FOUND


def test_a_sessions_gpus_and_one_without_samples(token_cli, alice):
    session = SessionFactory(user=alice, name="nb", gpus=1)
    Session.objects.filter(pk=session.pk).update(created_at=datetime.fromtimestamp(T0 - 60, tz=UTC))
    done = token_cli("gpu", "session", "nb")
    assert done.returncode == 0 and done.stdout == "" and "No GPU samples for Session nb" in done.stderr
    session_gpu_samples_record(server_id=session.pk, samples=[GpuSample(t=T0 + 1, gpu=0, util=75)])
    done = token_cli("gpu", "session", "nb")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Session nb: utilisation mean 75.0 %")
    assert token_cli("gpu", "session", "nb", "--json").json()["summary"]["current"][0]["util"] == 75.0



def test_a_warned_sessions_idle_gpus_and_keep_it(token_cli, alice):
    """The warning the card shows is in `gpuportal gpu session`, and `gpuportal gpu keep` answers it."""
    from portal.gpus.models import IdleWatch

    now = timezone.now()
    session = SessionFactory(user=alice, name="lunch", gpus=1, ready_at=now, started_at=now,
                                    node="gpu1")
    session_gpu_samples_record(server_id=session.pk, samples=[GpuSample(t=time.time(), gpu=0, util=0)])
    IdleWatch.objects.create(session=session, state=IdleWatch.State.WARNED, warned_at=now,
                             figures={"idle_minutes": 31, "grace_minutes": 15})
    shown = token_cli("gpu", "session", "lunch")
    assert shown.returncode == 0, shown.stderr
    assert "Idle GPUs for 31 min: stops at" in shown.stdout and "gpuportal gpu keep NAME" in shown.stdout
    kept = token_cli("gpu", "keep", "lunch")
    assert kept.returncode == 0, kept.stderr
    assert "kept" in kept.stdout and IdleWatch.objects.get(session=session).state == IdleWatch.State.OK
    again = token_cli("gpu", "keep", "lunch")
    assert again.returncode != 0 and "no idle-GPU warning" in again.stderr, again.stderr
