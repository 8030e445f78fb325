from django.apps import AppConfig


class BenchmarksConfig(AppConfig):
    name = "portal.benchmarks"
    label = "benchmarks"
    verbose_name = "Benchmarks"

    def ready(self) -> None:
        from portal.benchmarks import receivers  # noqa: F401 - connects to jobs_ended
