"""Startup check: every folder in templates/jobs/ must load; broken ones are named with the reason."""

from django.core import checks

from portal.jobs.job_templates import catalog


@checks.register("jobs")
def job_templates_check(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    catalog.cache_clear()
    # A broken template is left out of the catalog rather than stopping the whole portal.
    return [
        checks.Warning(f"Job template {slug!r} is broken and not offered: {message}",
                       id="jobs.W001", obj=slug)
        for slug, message in catalog().errors.items()
    ]
