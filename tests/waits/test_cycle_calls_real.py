"""The why-waiting look costs one `squeue --start`, one `sprio` and one `sshare` per poll cycle,
however many users wait: counted at the runner, on the real bed, with 1 and with 30 users whose
jobs are pending (held with --begin, so they cost no resources)."""

from collections import Counter

import pytest
from django.utils import timezone

from portal.jobs.models import JobState
from portal.waits.models import Waiting
from slurm.runner import SlurmRunner
from tests.factories import JobFactory, UserFactory
from tests.poll_helpers import slurm_poll

pytestmark = [pytest.mark.integration, pytest.mark.django_db]
COMMANDS = ("squeue", "squeue --start", "sprio", "sshare", "sacct")


@pytest.fixture
def calls(monkeypatch):
    """Slurm commands the cycle runs, by name ('squeue --start' apart from the plain squeue)."""
    seen = Counter()
    real = SlurmRunner.run_bytes

    def counted(self, command, args, **kwargs):
        seen[f"{command} --start" if "--start" in args else command] += 1
        return real(self, command, args, **kwargs)

    monkeypatch.setattr(SlurmRunner, "run_bytes", counted)
    return seen


def test_one_call_of_each_per_cycle_whatever_the_number_of_users(sbatch, slurm, calls):
    held = [sbatch("alice" if n % 2 else "bob", "--begin=now+2hours", "--time=1") for n in range(30)]
    per_cycle = []
    for users in (1, 30):
        for n, job_id in enumerate(held[:users]):
            JobFactory(user=UserFactory(username=f"waiter{n}"), state=JobState.PENDING, slurm_job_id=job_id,
                       slurm_submitted_at=timezone.now())
        calls.clear()
        slurm_poll(slurm=slurm)
        per_cycle.append({name: calls[name] for name in COMMANDS})
        assert set(held[:users]) <= set(Waiting.objects.values_list("job_id", flat=True))
    assert per_cycle[0] == per_cycle[1] == {"squeue": 1, "squeue --start": 1, "sprio": 1, "sshare": 1,
                                            "sacct": 0}
