"""Test settings: the same services as `make up`, a throwaway test database, fast hashing."""

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
AXES_FAILURE_LIMIT = 5
# Separate names let several test runs share one PostgreSQL server.
DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME", default="test_gpuportal")}  # noqa: F405
