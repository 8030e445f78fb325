from tests.jobs.conftest import cleanup_jobs, polled  # noqa: F401 (the real-Slurm test's set-up)
