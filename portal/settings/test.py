"""Test settings: the same services as `make up`, a throwaway test database, fast hashing."""

from .base import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
AXES_FAILURE_LIMIT = 5
