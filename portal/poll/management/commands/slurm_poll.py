from django.core.management.base import BaseCommand

from portal.poll.cycle import poll_cycle


class Command(BaseCommand):
    help = "Run one Slurm poll cycle now (Celery beat runs it every SLURM_POLL_SECONDS)."

    def handle(self, *args: object, **options: object) -> None:
        report = poll_cycle()
        if not report.ran:
            self.stdout.write("another poll cycle is running; nothing done")
        elif report.status.error:
            self.stderr.write(f"Slurm did not answer: {report.status.error}")
        else:
            self.stdout.write(f"cluster snapshot refreshed at {report.status.refreshed_at:%H:%M:%S}")
