from django.core.management.base import BaseCommand

from portal.cluster.services import slurm_poll


class Command(BaseCommand):
    help = "Run one Slurm poll cycle now (Celery beat runs it every SLURM_POLL_SECONDS)."

    def handle(self, *args: object, **options: object) -> None:
        status = slurm_poll()
        if status.error:
            self.stderr.write(f"Slurm did not answer: {status.error}")
        else:
            self.stdout.write(f"cluster snapshot refreshed at {status.refreshed_at:%H:%M:%S}")
