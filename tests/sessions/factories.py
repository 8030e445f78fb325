from datetime import timedelta

import factory
from django.utils import timezone

from portal.cluster.models import Partition, PartitionGpu, SlurmJob
from portal.sessions.models import Session
from tests.factories import UserFactory


class PartitionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Partition
        django_get_or_create = ("name",)
        skip_postgeneration_save = True

    name = "gpu"
    is_default = True
    max_time = None
    node_count = 1
    cpus_total = 64

    @factory.post_generation
    def gpus(partition, create, extracted, **kwargs):
        PartitionGpu.objects.get_or_create(partition=partition, gpu_type="a100",
                                           defaults={"total": 4 if extracted is None else extracted})


class DebugPartitionFactory(PartitionFactory):
    name = "debug"
    is_default = False
    max_time = timedelta(hours=1)


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Session

    user = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"server-{n}")
    partition = "gpu"
    gpus = 1
    hours = 8.0
    nodes = 1
    hub_accepted_at = factory.LazyFunction(timezone.now)


class SlurmJobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SlurmJob

    job_id = factory.Sequence(lambda n: str(1000 + n))
    user = "alice"
    partition = "gpu"
    state = "RUNNING"
    gpus = 1
    nodes = "vm"
