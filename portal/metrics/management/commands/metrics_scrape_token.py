from django.core.management.base import BaseCommand, CommandParser

from portal.metrics.services import scrape_token_create


class Command(BaseCommand):
    help = ("Create a scrape token for /metrics and print its key (once; only its digest is kept). "
            "Revoke it in the admin site (Metrics, Scrape tokens).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who scrapes with it, e.g. prometheus@monitor01")

    def handle(self, *args: object, name: str, **options: object) -> None:
        _, key = scrape_token_create(name=name)
        self.stdout.write(key)
