import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.webapps import gateway_role


class Command(BaseCommand):
    help = ("Give the apps gateway's database role exactly what the gateway reads and writes (its apps, "
            "their owners' sign-in state, redeemed grants) and nothing else. Run it as the database admin "
            "after every migrate.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database-url", default="",
                            help="a superuser's connection to the portal's database, e.g. "
                                 "postgresql:///gpuportal?host=/var/run/postgresql run as postgres")
        parser.add_argument("--role", default="",
                            help="the gateway's role (LOGIN, created beforehand with a password of its own; "
                                 "default: the portal's role + _gateway)")
        parser.add_argument("--check", action="store_true",
                            help="grant nothing: print what the role may do beyond its grants and exit 1 "
                                 "if anything (without --database-url, the portal's connection)")

    def handle(self, *args: object, database_url: str, role: str, check: bool, **options: object) -> None:
        db = settings.DATABASES["default"]
        role = role or f"{db['USER']}_gateway"
        if not check and not database_url:
            raise CommandError("--database-url: the database admin's connection (the portal's role does "
                               "not hand out privileges)")
        conninfo = database_url or psycopg.conninfo.make_conninfo(
            dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"], host=db["HOST"],
            port=str(db["PORT"] or ""))
        try:
            with psycopg.connect(conninfo) as connection:
                if not check:
                    gateway_role.grant(connection, role=role)
                found = gateway_role.problems(connection, role=role)
        except (psycopg.Error, LookupError) as error:
            raise CommandError(str(error).strip()) from error
        for problem in found:
            self.stdout.write(problem)
        if found:
            raise CommandError(f"the gateway's role {role} may do more or less than it needs "
                               f"({len(found)} problems)")
        self.stdout.write(f"{role} may read the gateway's apps and their owners' sign-in state, note "
                          "last_access and record redeemed grants, nothing else")
