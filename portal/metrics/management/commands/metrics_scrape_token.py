from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from portal.metrics.services import scrape_token_create, scrape_token_expiry


class Command(BaseCommand):
    help = ("Create a scrape token for /metrics and print its key (once; only its digest is kept). "
            "Revoke it in the admin site (Metrics, Scrape tokens).")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who scrapes with it, e.g. prometheus@monitor01")
        parser.add_argument("--days", type=int, default=None,
                            help="expires after this many days (0: never; default METRICS_SCRAPE_TOKEN_DAYS)")

    def handle(self, *args: object, name: str, days: int | None, **options: object) -> None:
        if days is not None and days < 0:
            raise CommandError("--days: 0 (never) or more")
        expires_at = scrape_token_expiry() if days is None else (
            timezone.now() + timedelta(days=days) if days else None)
        _, key = scrape_token_create(name=name, expires_at=expires_at)
        self.stdout.write(key)
