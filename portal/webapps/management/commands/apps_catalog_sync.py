from django.core.management.base import BaseCommand

from portal.webapps.catalog import catalog_sync


class Command(BaseCommand):
    help = "Write the built-in app types (TensorBoard, VS Code, My web app) into the catalog."

    def handle(self, *args: object, **options: object) -> None:
        self.stdout.write(f"app types: {', '.join(catalog_sync())}")
