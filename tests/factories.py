from datetime import timedelta

import factory

from portal.accounts.models import User


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    first_name = "Test"
    last_name = factory.Faker("last_name")
    email = factory.LazyAttribute(lambda user: f"{user.username}@gpuportal.test")
    uid_number = factory.Sequence(lambda n: 20000 + n)
    gid_number = 10000
    home_directory = factory.LazyAttribute(lambda user: f"/home/{user.username}")
    ldap_groups = ["portal-users"]


class JobFactory(factory.django.DjangoModelFactory):
    """A portal job row as the sync left it; no Slurm job behind it."""

    class Meta:
        model = "jobs.Job"

    user = factory.SubFactory(UserFactory, username="alice")
    name = factory.Sequence(lambda n: f"job-{n}")
    template = "custom"
    parameters = factory.LazyFunction(lambda: {"commands": "echo hi", "gpus": 1, "nodes": 1})
    script = "#!/bin/bash\nset -euo pipefail\necho hi\n"
    partition = "gpu"
    gpus_per_node = 1
    cpus_per_node = 8
    mem_mb_per_node = 48 * 1024
    time_limit = timedelta(hours=8)
    output_dir = factory.LazyAttribute(lambda job: f"/home/{job.user.username}/gpuportal/jobs")
    state = "COMPLETED"
    slurm_job_id = factory.Sequence(lambda n: str(900000 + n))


class AppFactory(factory.django.DjangoModelFactory):
    """A web app row (portal.webapps) of the built-in type named by `type__slug`; no Slurm job."""

    class Meta:
        model = "webapps.App"

    user = factory.SubFactory(UserFactory, username="alice")
    type = factory.LazyFunction(lambda: _app_type("tensorboard"))
    parameters = factory.LazyAttribute(lambda app: {"logdir": f"/home/{app.user.username}/logs"})
    time_limit_minutes = 480
    idle_minutes = 60
    state = "ended"


def _app_type(slug: str) -> object:
    from portal.webapps.catalog import catalog_sync
    from portal.webapps.models import AppType

    if not AppType.objects.filter(slug=slug).exists():
        catalog_sync()
    return AppType.objects.get(slug=slug)
