"""Apply the portal's projects to Slurm (every configured cluster): accounts, members from LDAP,
GPU-hour budgets.

`--define name:ldap_group:account:hours` first creates or updates a project (hours '-' = no
budget), so a bed or a deployment script can declare its projects in one idempotent call."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from portal.projects.models import Project
from portal.projects.services import projects_sync_clusters


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
        reports = projects_sync_clusters()
        failed = []
        for cluster, report in reports.items():
            # Each cluster's lines start with its name where there are several (#38).
            prefix = f"{cluster}: " if len(reports) > 1 else ""
            if report.unreachable:
                failed.append(f"{prefix}{report.unreachable}")
                continue
            self.stdout.write(f"{prefix}accounts added: {report.accounts_added}; users added: "
                              f"{report.users_added}; removed: {report.users_removed}; budgets set "
                              f"(GPU-minutes): {report.budgets_set}")
            if report.removals_refused:
                self.stderr.write(f"{prefix}removals held back (PROJECTS_SYNC_MAX_REMOVE_SHARE): "
                                  f"{report.removals_refused}")
            failed += [f"{prefix}{account}: {message}" for account, message in report.failed.items()]
        if failed:
            raise CommandError("not applied: " + "; ".join(failed))
