import factory
from django.utils import timezone

from tests.factories import UserFactory


class ResultFactory(factory.django.DjangoModelFactory):
    """A parsed ResNet-50 throughput result, as a job's recording would leave it."""

    class Meta:
        model = "benchmarks.BenchmarkResult"

    tool = "tf_cnn_benchmarks"
    model = "resnet50"
    framework = "PyTorch"
    framework_version = "2.14.1"
    precision = "fp32"
    batch_size_per_gpu = 8
    gpus = 1
    nodes = 1
    gpu_type = "a100"
    partition = "gpu"
    environment = "pytorch"
    user = factory.SubFactory(UserFactory, username="alice")
    run_at = factory.LazyFunction(timezone.now)
    metric = "images_per_sec"
    value = 100.0
    unit = "images/s"
    parsed = True
    data = factory.LazyFunction(lambda: {"parsed": True})
