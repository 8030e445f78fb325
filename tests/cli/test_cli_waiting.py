"""`gpuportal job` and `gpuportal session show` say why a queued job or session waits (the API's
`waiting`, from the rows the poll cycle wrote)."""

from datetime import timedelta

from django.utils import timezone

from portal.waits.models import Waiting
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory


def _waiting(job_id, **fields):
    values = {"user": "alice", "partition": "gpu", "reason": "Resources", "position": 1,
              "pending_in_partition": 3, "priority_total": 2920, "priority_age": 7,
              "priority_fairshare": 1667, "priority_jobsize": 254, "priority_partition": 992,
              "priority_qos": 0, "fairshare": 0.25,
              "estimated_start": timezone.now() + timedelta(hours=1), "updated_at": timezone.now()}
    Waiting.objects.create(job_id=job_id, **{**values, **fields})


def test_job_and_session_show_why_they_wait(token_cli, alice):
    job = JobFactory(user=alice, state="PENDING", slurm_job_id="5151")
    _waiting("5151")
    shown = token_cli("job", str(job.pk))
    assert shown.returncode == 0, shown.stderr
    assert "Why it waits" in shown.stdout and "in use by running jobs" in shown.stdout
    assert "2920 = age 7 + fair share 1667 + job size 254 + partition 992 + QOS 0" in shown.stdout
    assert "1 of 3 waiting for gpu" in shown.stdout and "0.25 (1 = you used little lately)" in shown.stdout

    SessionFactory(user=alice, name="queued", job_id="5152", queued_at=timezone.now())
    _waiting("5152", reason="JobHeldAdmin", estimated_start=None, priority_total=None, position=None)
    shown = token_cli("session", "show", "queued")
    assert shown.returncode == 0, shown.stderr
    assert "Held by an administrator" in shown.stdout and "not known yet" in shown.stdout
    assert token_cli("--json", "job", str(job.pk)).json()["waiting"]["priority"]["total"] == 2920
