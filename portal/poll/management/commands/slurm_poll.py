from django.core.management.base import BaseCommand

from portal.poll.cycle import CycleReport, cluster_poll_cycle, poll_cycle
from slurm.clusters import clusters_from_settings


class Command(BaseCommand):
    help = ("Run one Slurm poll cycle now (Celery beat runs it every SLURM_POLL_SECONDS), and one of "
            "each other configured cluster.")

    def handle(self, *args: object, **options: object) -> None:
        self._say(poll_cycle(), "")
        for cluster in clusters_from_settings().all:
            if not cluster.default:
                self._say(cluster_poll_cycle(cluster=cluster.name), f"{cluster.name}: ")

    def _say(self, report: CycleReport, prefix: str) -> None:
        if not report.ran:
            self.stdout.write(f"{prefix}another poll cycle is running; nothing done")
        elif report.status.error:
            self.stderr.write(f"{prefix}Slurm did not answer: {report.status.error}")
        else:
            self.stdout.write(f"{prefix}cluster snapshot refreshed at {report.status.refreshed_at:%H:%M:%S}")
