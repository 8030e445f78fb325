from django.core.management.base import BaseCommand

from portal.environments.services import environments_sync


class Command(BaseCommand):
    help = ("Register the environments under ENVIRONMENTS_DIR from their manifests and run every "
            "environment's health check (Celery beat re-checks every ENVIRONMENTS_CHECK_SECONDS).")

    def handle(self, *args: object, **options: object) -> None:
        for environment in environments_sync():
            if environment.healthy:
                versions = ", ".join(f"{n} {v}" for n, v in environment.frameworks.items())
                self.stdout.write(f"{environment.name}: healthy ({versions or 'no frameworks'})")
            else:
                self.stderr.write(f"{environment.name}: BROKEN: {environment.health_message}")
