"""Apply the portal's projects to Slurm: accounts, members from LDAP, GPU-hour budgets.

`--define name:ldap_group:account:hours` first creates or updates a project (hours '-' = no
budget), so a bed or a deployment script can declare its projects in one idempotent call."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.accounts.ldap import DirectoryUnavailable
from portal.projects.models import Project
from portal.projects.services import projects_sync
from slurm.adapter import Slurm
from slurm.errors import SlurmError


class Command(BaseCommand):
    help = "Apply projects (LDAP group -> Slurm account, GPU-hour budget) to Slurm, idempotently."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--define", action="append", default=[], metavar="NAME:GROUP:ACCOUNT:HOURS")

    def handle(self, *args: object, **options: object) -> None:
        for definition in options["define"]:
            try:
                name, group, account, hours = definition.split(":")
                budget = None if hours == "-" else int(hours)
            except ValueError:
                raise CommandError(f"--define wants NAME:GROUP:ACCOUNT:HOURS, got {definition!r}") from None
            project = Project(name=name, ldap_group=group, slurm_account=account, budget_gpu_hours=budget)
            project.full_clean(validate_unique=False)
            Project.objects.update_or_create(name=name, defaults={
                "ldap_group": group, "slurm_account": account, "budget_gpu_hours": budget})
        try:
            report = projects_sync(slurm=Slurm.from_settings())
        except (DirectoryUnavailable, SlurmError) as error:
            raise CommandError(f"not applied: {error}") from error
        self.stdout.write(f"accounts added: {report.accounts_added}; users added: {report.users_added}; "
                          f"removed: {report.users_removed}; budgets set (GPU-minutes): {report.budgets_set}")
        if report.removals_refused:
            self.stderr.write(f"removals held back (PROJECTS_SYNC_MAX_REMOVE_SHARE): "
                              f"{report.removals_refused}")
        if report.failed:
            raise CommandError("not applied: " + "; ".join(f"{account}: {message}"
                                                         for account, message in report.failed.items()))
