from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "portal.jobs"

    def ready(self) -> None:
        # Load the job templates at startup: broken ones are logged now (and `check` warns), not at
        # the first submission.
        from portal.jobs import checks, receivers  # noqa: F401 - registers the check and receivers
        from portal.jobs.job_templates import catalog

        catalog()
        from portal.jobs.services.sync import jobs_follow
        from portal.lifecycle.kinds import Kind, kind_register
        kind_register(Kind("jobs", jobs_follow, order=20, every_cluster=True))
