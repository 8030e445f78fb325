import psycopg
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.audit import sealing


class Command(BaseCommand):
    help = ("Give the audit trail's tables and audit_prune() to a role of their own, so the portal's "
            "role can only insert and read events. Run it as the database admin after every migrate.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--database-url", default="",
                            help="a superuser's connection to the portal's database, e.g. "
                                 "postgresql:///gpuportal?host=/var/run/postgresql run as postgres")
        parser.add_argument("--owner", default=sealing.AUDIT_OWNER,
                            help=f"the role that owns the trail (NOLOGIN; created if missing; default "
                                 f"{sealing.AUDIT_OWNER})")
        parser.add_argument("--check", action="store_true",
                            help="seal nothing: print what is not sealed and exit 1 if anything is "
                                 "(any role may check; without --database-url, the portal's)")
        parser.add_argument("--unseal", action="store_true",
                            help="give the trail back to the portal's role, for a migration that "
                                 "changes the event tables; seal again right after it")

    def handle(self, *args: object, database_url: str, owner: str, check: bool, unseal: bool,
               **options: object) -> None:
        db = settings.DATABASES["default"]
        portal_role = db["USER"]
        if check and unseal:
            raise CommandError("--check or --unseal, not both")
        if not check and not database_url:
            raise CommandError("--database-url: the database admin's connection (the portal's role "
                               "cannot seal its own trail)")
        conninfo = database_url or psycopg.conninfo.make_conninfo(
            dbname=db["NAME"], user=db["USER"], password=db["PASSWORD"], host=db["HOST"],
            port=str(db["PORT"] or ""))
        try:
            with psycopg.connect(conninfo) as connection:
                if unseal:
                    sealing.unseal(connection, portal_role=portal_role)
                    self.stdout.write(f"the audit trail is unsealed: {portal_role} owns it; seal it again")
                    return
                if not check:
                    sealing.seal(connection, portal_role=portal_role, owner=owner)
                found = sealing.problems(connection, portal_role=portal_role, owner=owner)
        except psycopg.Error as error:
            raise CommandError(str(error).strip()) from error
        for problem in found:
            self.stdout.write(problem)
        if found:
            raise CommandError(f"the audit trail is not sealed ({len(found)} problems)")
        self.stdout.write(f"the audit trail is sealed: {owner} owns it, {portal_role} may only insert "
                          "and read")
