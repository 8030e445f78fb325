from django.core.management.base import BaseCommand

from portal.benchmarks.services import published_load


class Command(BaseCommand):
    help = "Load (or reload) the built-in published results from portal/benchmarks/data (idempotent)."

    def handle(self, *args: object, **options: object) -> None:
        count = published_load()
        self.stdout.write(f"{count} published results loaded")
