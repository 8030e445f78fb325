import argparse
import asyncio

from django.conf import settings
from django.core.management.base import BaseCommand

from portal.webapps.gateway import serve


class Command(BaseCommand):
    help = "Runs the apps gateway (a reverse proxy for users' web apps) on APPS_GATEWAY_BIND."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--bind", default=settings.APPS_GATEWAY_BIND,
                            help="host:port to listen on (default: APPS_GATEWAY_BIND)")

    def handle(self, *args, bind: str, **options: object) -> None:
        self.stdout.write(f"apps gateway: listening on {bind}, serving {settings.APPS_ORIGIN}")
        self.stdout.flush()
        asyncio.run(serve(bind))
