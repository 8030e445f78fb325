"""Test settings: the same services as `make up`, a throwaway test database, fast hashing."""

import os

from .base import *  # noqa: F403

# Throwaway secrets of the tests' own (base.py has no defaults): never the ones `make up` generated.
SECRET_KEY = "test-only-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz"  # noqa: S105
JUPYTERHUB_API_TOKEN = "test-only-hub-api-token"  # noqa: S105
JUPYTERHUB_OAUTH_CLIENT_SECRET = "test-only-hub-oauth-secret"  # noqa: S105
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = True
AXES_FAILURE_LIMIT = 5
# Separate names let several test runs share one PostgreSQL server.
DATABASES["default"]["TEST"] = {"NAME": env("TEST_DATABASE_NAME", default="test_gpuportal")}  # noqa: F405
# The shared Redis, with keys of this test process's own (rate-limit counters of its users included).
CACHES["default"]["KEY_PREFIX"] = f"test-{os.getpid()}"  # noqa: F405
# Rate limits out of the way; tests/test_throttling.py sets its own.
API_THROTTLE_RATES = dict.fromkeys(API_THROTTLE_RATES, "100000/min")  # noqa: F405
# Never the policy file of `make up`'s hub: one per test process.
POLICY_FILE = f"/tmp/gpuportal-test-policy-{os.getpid()}/policy.json"  # noqa: S108
SERVERS_QUEUE_FILE = f"/tmp/gpuportal-test-policy-{os.getpid()}/queue.json"  # noqa: S108
# Request and task counters of this test process's own (portal.metrics.store).
METRICS_KEY_PREFIX = f"test-{os.getpid()}:metrics"
# A one-cluster site whatever the bed's /etc/gpuportal/clusters.d holds (install.sh --dev writes its two
# clusters there for the live services): no cluster file, so the cluster comes from the SLURM_*
# settings. Tests of several clusters point CLUSTERS_DIR at a folder of their own.
CLUSTERS_DIR = env("TEST_CLUSTERS_DIR", default="/nonexistent/clusters.d")  # noqa: F405
