from tests.jobs.conftest import cleanup_jobs, polled  # noqa: F401 - fixtures of the real-job tests
