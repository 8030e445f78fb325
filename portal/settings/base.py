"""Settings shared by every environment; values come from the environment (12-factor).

`slurm/dev/env.sh` exports the values for the local cluster that `make up` starts.
"""

import ipaddress
import sys
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parents[2]

env = environ.Env()

# No default: `make up` generates one (mode 0600, kept across restarts); production.py refuses to
# start without a real one.
SECRET_KEY = env("DJANGO_SECRET_KEY", default="")
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "portal.core",
    "portal.accounts",
    "portal.cluster",
    "portal.environments",
    "oauth2_provider",
    "portal.policy",
    "portal.sessions",
    "portal.jobs",
    "portal.poll",
    "portal.tensorboards",
    "portal.webapps",
    "portal.benchmarks",
    "portal.containers",
    "portal.extensions",
    "portal.launches",
    "portal.notifications",
    "portal.reports",
    "portal.gpus",
    "portal.tracking",
    "portal.sweeps",
    "portal.metrics",
    "portal.waits",
    "portal.projects",
    "portal.home",
    "portal.efficiency",
    "portal.usage",
    "portal.files",
    "portal.provenance",
    "pgtrigger",
    "pghistory",
    "portal.audit",
]

MIDDLEWARE = [
    # Outermost: counts and times every request (portal.metrics, GET /metrics).
    "portal.metrics.middleware.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Outermost but one: every page gets the policy, error pages included.
    "portal.core.csp.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: the audit context names the user (portal.audit).
    "portal.audit.middleware.AuditMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "portal.core.middleware.PortalErrorMiddleware",
    # Last, as django-axes requires.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db(
        "DATABASE_URL", default="postgres://gpuportal:gpuportal@127.0.0.1:5433/gpuportal"
    )
}
# Connections are kept (a new one costs milliseconds of authentication on every request); one broken
# by a database restart is noticed and replaced at the next request.
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = [
    # Axes first: it refuses locked-out clients before the directory is asked.
    "axes.backends.AxesStandaloneBackend",
    "portal.accounts.backends.LdapBackend",
]
LOGIN_URL = "accounts:login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "accounts:login"

# --- LDAP directory (portal.accounts.ldap) ---
LDAP_URI = env("LDAP_URI", default="ldap://127.0.0.1:3389")
LDAP_BASE_DN = env("LDAP_BASE_DN", default="dc=gpuportal,dc=test")
LDAP_USER_DN_TEMPLATE = env("LDAP_USER_DN_TEMPLATE", default="uid={username},ou=people,{base}")
LDAP_GROUP_BASE = env("LDAP_GROUP_BASE", default="ou=groups,{base}")
LDAP_TIMEOUT_SECONDS = env.int("LDAP_TIMEOUT_SECONDS", default=5)
# TLS: an ldaps:// URI, or StartTLS on ldap://; certificates are checked against LDAP_CA_FILE
# (default: the system's CAs).
LDAP_START_TLS = env.bool("LDAP_START_TLS", default=False)
LDAP_CA_FILE = env("LDAP_CA_FILE", default="")
# The account the periodic directory sync searches groups with; empty: anonymous.
LDAP_BIND_DN = env("LDAP_BIND_DN", default="")
LDAP_BIND_PASSWORD = env("LDAP_BIND_PASSWORD", default="")
# Users who left LDAP_USER_GROUP lose tokens and grants within this many seconds (and at login).
DIRECTORY_SYNC_SECONDS = env.float("DIRECTORY_SYNC_SECONDS", default=300.0)
# A sync that would deprovision more than this share of the active users (and more than one user)
# deprovisions nobody and tells the admins: an emptied or misread group is not a mass departure.
DIRECTORY_SYNC_MAX_DEPROVISION_SHARE = env.float("DIRECTORY_SYNC_MAX_DEPROVISION_SHARE", default=0.1)
# Personal API tokens expire after this many days (0: never).
API_TOKEN_LIFETIME_DAYS = env.int("API_TOKEN_LIFETIME_DAYS", default=90)
LDAP_USER_GROUP = env("LDAP_USER_GROUP", default="portal-users")
LDAP_ADMIN_GROUP = env("LDAP_ADMIN_GROUP", default="portal-admins")

# --- Login lockout (django-axes): 5 failures per user and client lock both for 15 minutes ---
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# A refused attempt is no guess: it neither extends a lockout nor counts towards a username's delay.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "portal.accounts.lockout.locked_out"
AXES_CLIENT_IP_CALLABLE = "portal.core.client_address.client_address"
AXES_VERBOSE = False
# Proxies (addresses or networks) whose X-Forwarded-For / X-Real-IP name the client; nobody else's
# are believed. Behind deploy/nginx/gpuportal.conf on the same host: 127.0.0.1,::1.
TRUSTED_PROXIES = env.list("TRUSTED_PROXIES", default=[])
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError as _error:
        raise ImproperlyConfigured(f"TRUSTED_PROXIES: {_proxy!r} is no address or network") from _error
# Per username, whatever the address: after this many failures within AXES_COOLOFF_TIME, each further
# attempt waits LOGIN_DELAY_SECONDS after the last failure, doubling with every failure up to
# LOGIN_DELAY_MAX_SECONDS (429, Retry-After). Short: anybody can make a username wait, never for long.
LOGIN_DELAY_AFTER_FAILURES = env.int("LOGIN_DELAY_AFTER_FAILURES", default=5)
LOGIN_DELAY_SECONDS = env.float("LOGIN_DELAY_SECONDS", default=1.0)
LOGIN_DELAY_MAX_SECONDS = env.float("LOGIN_DELAY_MAX_SECONDS", default=30.0)

# --- Slurm (slurm.client) ---
SLURM_BIN_DIR = env("SLURM_BIN_DIR", default="/usr/bin")
# Prefix that runs a command as another Unix user; {username} is substituted. The portal runs as an
# unprivileged account that deploy/sudoers.d/gpuportal lets run sbatch, scancel, scontrol and the
# job-files helper as members of gpuportal-users, and nothing else (-n: fail, never prompt).
SLURM_EXEC_PREFIX = env.list("SLURM_EXEC_PREFIX", default=["/usr/bin/sudo", "-n", "-u", "{username}", "--"])
SLURM_TIMEOUT_SECONDS = env.float("SLURM_TIMEOUT_SECONDS", default=20.0)
# The reconcile: jobs and sessions report their own transitions (portal/reports/), so the cycle only
# catches the rest (kills, node failures, time limits). 4 slurmctld RPCs a cycle: 240 an hour.
SLURM_POLL_SECONDS = env.float("SLURM_POLL_SECONDS", default=60.0)
# A cycle's steps that can wait (stop retries, idle GPUs, why work waits...) are left for the next
# one once it has run this long: well under Celery's hard kill (CELERY_TASK_TIME_LIMIT_SECONDS).
POLL_CYCLE_BUDGET_SECONDS = env.float("POLL_CYCLE_BUDGET_SECONDS", default=60.0)
# A snapshot older than this many poll cycles is shown as stale.
SLURM_STALE_AFTER_CYCLES = 3
# "sudo": Slurm's commands (sbatch as the user through sudo). "slurmrestd": submit, cancel, the
# cycle's queue and accounting reads and time limits over Slurm's REST daemon (slurm/rest.py), each
# request with a short-lived token of its user from the narrow helper below; the rest stays on sudo.
SLURM_ADAPTER = env("SLURM_ADAPTER", default="sudo")
SLURM_REST_URL = env("SLURM_REST_URL", default="http://127.0.0.1:6820")
SLURM_TOKEN_COMMAND = env.list("SLURM_TOKEN_COMMAND",
                               default=["/usr/bin/sudo", "-n", "/usr/local/libexec/gpuportal/slurm-token"])
SLURM_TOKEN_LIFESPAN_SECONDS = env.int("SLURM_TOKEN_LIFESPAN_SECONDS", default=600)  # at most 900
SLURM_TOKEN_RENEW_SECONDS = env.int("SLURM_TOKEN_RENEW_SECONDS", default=120)
# One TOML file per Slurm cluster the portal fronts (#38, slurm/clusters.py, docs/admin/adding-a-cluster.md),
# root's and writable by root alone; read once per process. No file: one cluster, the SLURM_* settings'.
CLUSTERS_DIR = env("CLUSTERS_DIR", default="/etc/gpuportal/clusters.d")
# The name of the one cluster the SLURM_* settings make without a cluster file: Slurm's ClusterName,
# which work records carry (Job.cluster) and keep when a site later adds cluster files.
SLURM_CLUSTER_NAME = env("SLURM_CLUSTER_NAME", default="gpuportal")
# The portal's own account (a Slurm Operator): slurmrestd reads and time limits go out as it.
SLURM_OPERATOR_ACCOUNT = env("SLURM_OPERATOR_ACCOUNT", default="gpuportal")
# The Slurm account the projects' accounts are made under (portal.projects). An administrator creates
# it once and makes SLURM_OPERATOR_ACCOUNT its coordinator (docs/deploy.md): that is all the
# privilege projects_sync needs to add accounts, members and budgets below it.
SLURM_PROJECTS_PARENT_ACCOUNT = env("SLURM_PROJECTS_PARENT_ACCOUNT", default="projects")
# How often a worker applies every project to Slurm (accounts, members from LDAP, budgets), and the
# largest share of an account's members one run may remove (more: nobody is removed, admins are told).
PROJECTS_SYNC_SECONDS = env.float("PROJECTS_SYNC_SECONDS", default=900.0)
PROJECTS_SYNC_MAX_REMOVE_SHARE = env.float("PROJECTS_SYNC_MAX_REMOVE_SHARE", default=0.5)

# --- Software environments (portal.environments) ---
# Built by scripts/envs/build.sh, one prefix per environment with its manifest (gpuportal-env.json).
# The hub accepts Python environments only under this folder (spawners/jupyterhub_config.py).
ENVIRONMENTS_DIR = env("ENVIRONMENTS_DIR", default="/opt/gpuportal/envs")
ENVIRONMENTS_CHECK_SECONDS = env.float("ENVIRONMENTS_CHECK_SECONDS", default=3600.0)
# Importing TensorFlow or PyTorch takes seconds on a cold file system; a hung import is broken.
ENVIRONMENTS_CHECK_TIMEOUT_SECONDS = env.float("ENVIRONMENTS_CHECK_TIMEOUT_SECONDS", default=60.0)

# --- Containers (portal.containers; README "Containers") ---
# Which runtimes this site runs, each with its binary and default binds ('SRC[:DST][:ro]', {home}
# for the user's home). The portal's venv is bound too: it is the Jupyter + batchspawner the
# notebook server runs with the image's own Python. Apptainer and enroot: see the README.
_DATA_DIR = env("GPUPORTAL_DATA_DIR", default="/data")
_CONTAINER_BINDS = env.list("CONTAINERS_BINDS", default=["{home}", f"{_DATA_DIR}:ro"])
_CONTAINERS_ENABLED = env.list("CONTAINERS_ENABLED_RUNTIMES", default=["charliecloud", "podman"])
CONTAINERS_RUNTIMES = {
    "charliecloud": {"binary": env("CONTAINERS_CHARLIECLOUD_BINARY", default="/usr/bin/ch-run")},
    # No systemd session in a Slurm job: runc (crun refuses hybrid cgroups), cgroupfs, file events.
    "podman": {"binary": env("CONTAINERS_PODMAN_BINARY", default="/usr/bin/podman"),
               "global_args": ["--runtime=runc", "--cgroup-manager=cgroupfs", "--events-backend=file"],
               "cdi": env.bool("CONTAINERS_PODMAN_CDI", default=False)},
    "apptainer": {"binary": env("CONTAINERS_APPTAINER_BINARY", default="/usr/bin/apptainer")},
    "enroot": {"binary": env("CONTAINERS_SRUN_BINARY", default="/usr/bin/srun"),
               "enroot": env("CONTAINERS_ENROOT_BINARY", default="/usr/bin/enroot")},
}
for _name, _config in CONTAINERS_RUNTIMES.items():
    _config.update(enabled=_name in _CONTAINERS_ENABLED, binds=list(_CONTAINER_BINDS))
# Admin-managed images must lie under these; users' pulls go to CONTAINERS_USER_IMAGES_DIR.
CONTAINERS_IMAGE_DIRS = env.list("CONTAINERS_IMAGE_DIRS", default=["/opt/gpuportal/images"])
CONTAINERS_USER_IMAGES_DIR = env("CONTAINERS_USER_IMAGES_DIR", default="{home}/gpuportal/images")
# The registry the catalog's own images come from (a stand-in for nvcr.io on the local bed).
CONTAINERS_REGISTRY_URL = env("CONTAINERS_REGISTRY_URL", default="https://127.0.0.1:5000")
# Registry keys are encrypted at rest with this key (Fernet), kept in a 0600 file, never in the database.
_STATE = Path(env("GPUPORTAL_STATE", default="/var/lib/gpuportal"))
CONTAINERS_KEY_FILE = env("CONTAINERS_KEY_FILE", default=str(_STATE / "portal" / "containers.key"))
CONTAINERS_PULL_TIME_MINUTES = env.int("CONTAINERS_PULL_TIME_MINUTES", default=30)
CONTAINERS_PULL_PARTITION = env("CONTAINERS_PULL_PARTITION", default="")
# Jupyter + batchspawner for notebook servers inside images: bound at the same path, run with the
# image's python3 (which must be the same minor version as this venv's).
CONTAINERS_JUPYTER_ENV = env("CONTAINERS_JUPYTER_ENV", default=str(_STATE / "venv"))
# What the hub binds into a server's container besides CONTAINERS_BINDS (spawners/container_launch.py):
# that venv and the servers' settings; a pulled Charliecloud image gets these mount points too.
CONTAINERS_SERVER_MOUNTS = [CONTAINERS_JUPYTER_ENV, str(BASE_DIR / "spawners" / "singleuser")]

# --- Web apps on compute nodes (portal.webapps): TensorBoard, VS Code, a user's own app ---
# Each runs as a small Slurm job of its owner, under templates/apps/runner.py (its own network
# namespace, a per-app secret in front), and is served by the apps gateway on its own origin:
# https://<app uuid>.<APPS_ORIGIN's host>/, never the portal's (another host name, so the portal's
# cookies never reach it). Production: a wildcard DNS name and certificate for *.<that host>.
APPS_ORIGIN = env("APPS_ORIGIN", default="http://apps.localhost:8003")
APPS_GATEWAY_BIND = env("APPS_GATEWAY_BIND", default="127.0.0.1:8003")  # 8002: the hub proxy API
# The in-job runner, and the Python that runs it on the nodes (a path every user can read).
APPS_RUNNER = env("APPS_RUNNER", default=str(BASE_DIR / "templates" / "apps" / "runner.py"))
APPS_PYTHON = env("APPS_PYTHON", default="/usr/bin/python3")
APPS_PARTITION = env("APPS_PARTITION", default="")  # empty: the cluster's default
APPS_MEM_MB = env.int("APPS_MEM_MB", default=2048)
APPS_MAX_PER_USER = env.int("APPS_MAX_PER_USER", default=4)
# An app whose job runs but that does not report "ready" within this long is ended, with its log.
APPS_START_TIMEOUT_SECONDS = env.float("APPS_START_TIMEOUT_SECONDS", default=180.0)
APPS_SYNC_SECONDS = env.float("APPS_SYNC_SECONDS", default=5.0)
# The grant that sends a browser from the portal to the gateway: valid this long, once.
APPS_GRANT_SECONDS = env.int("APPS_GRANT_SECONDS", default=30)
# Signs the gateway's grants and app cookies, and nothing else, so the gateway needs this key and
# never DJANGO_SECRET_KEY (which also signs logins, report and tracking tokens). Empty: SECRET_KEY
# (the test settings'); production refuses it empty, weak, or equal to DJANGO_SECRET_KEY.
APPS_SIGNING_KEY = env("APPS_SIGNING_KEY", default="")
# Shells in the browser (#37, portal.webapps.shells): a login shell as the user on the login host,
# served by the apps gateway like an app. One ends after this long without a keystroke (keep-alive
# pings do not count), or once no page has been connected for SHELL_RECONNECT_SECONDS (a closed
# tab; a dropped network reconnects within it to the same shell).
SHELL_IDLE_MINUTES = env.float("SHELL_IDLE_MINUTES", default=60.0)
SHELL_RECONNECT_SECONDS = env.float("SHELL_RECONNECT_SECONDS", default=30.0)
SHELL_MAX_PER_USER = env.int("SHELL_MAX_PER_USER", default=4)
# What TensorBoard, one of the built-in apps, runs (a tensorboard every user can execute on the nodes).
TENSORBOARD_COMMAND = env("TENSORBOARD_COMMAND", default=str(Path(sys.prefix) / "bin" / "tensorboard"))
CODE_SERVER_COMMAND = env("CODE_SERVER_COMMAND", default="/opt/gpuportal/code-server/bin/code-server")
# The read-only shared data mount. Paths users give (TensorBoard's folder, job template parameters of
# type path) must lie under their home, their scratch or this (portal.core.paths).
DATA_DIR = env("GPUPORTAL_DATA_DIR", default="/data")
# Each user's scratch folder ({username}, {home} filled in), e.g. /scratch/{username}; empty: none.
SCRATCH_DIR = env("GPUPORTAL_SCRATCH_DIR", default="")
# A notebook session's TensorBoard folder (the notebook templates write under it).
TENSORBOARD_SESSION_LOGDIR = env("TENSORBOARD_SESSION_LOGDIR", default="{home}/logs")

# --- Celery ---
CELERY_BROKER_URL = env("REDIS_URL", default="redis://127.0.0.1:6390/0")
# The cache every web worker shares (the API's rate limits, page menus): the broker's Redis unless
# CACHE_URL names another; short timeouts, so a stuck Redis never holds a request.
CACHES = {"default": {
    "BACKEND": "django.core.cache.backends.redis.RedisCache",
    "LOCATION": env("CACHE_URL", default=CELERY_BROKER_URL),
    "KEY_PREFIX": "gpuportal",
    "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
}}
CELERY_TASK_ACKS_LATE = True
# A task still running after this many seconds is killed (prefork: its pool process gets SIGKILL)
# and fails with TimeLimitExceeded; the worker goes on with a fresh process.
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT_SECONDS", default=120)
# Every audit event is also sent to syslog, one JSON object a line (docs/admin/audit.md): a Unix
# socket path, or host:port for UDP; empty: not sent.
AUDIT_SYSLOG_ADDRESS = env("AUDIT_SYSLOG_ADDRESS", default="/dev/log")
AUDIT_SYSLOG_FACILITY = env("AUDIT_SYSLOG_FACILITY", default="authpriv")  # SysLogHandler's facility names
# The audit-syslog task sends the new events this often.
AUDIT_SYSLOG_SECONDS = env.float("AUDIT_SYSLOG_SECONDS", default=60.0)
CELERY_BEAT_SCHEDULE = {
    "slurm-poll": {
        "task": "portal.poll.tasks.poll_cycle",
        "schedule": SLURM_POLL_SECONDS,
        # A cycle that could not start in time is dropped: the next one asks afresh.
        "options": {"expires": SLURM_POLL_SECONDS},
    },
    "directory-sync": {
        "task": "portal.accounts.tasks.directory_sync",
        "schedule": DIRECTORY_SYNC_SECONDS,
        "options": {"expires": DIRECTORY_SYNC_SECONDS},
    },
    "projects-sync": {
        "task": "portal.projects.tasks.projects_sync_all",
        "schedule": PROJECTS_SYNC_SECONDS,
        "options": {"expires": PROJECTS_SYNC_SECONDS},
    },
    "apps-sync": {
        "task": "portal.webapps.tasks.apps_sync",
        "schedule": APPS_SYNC_SECONDS,
        "options": {"expires": APPS_SYNC_SECONDS},
    },
    "audit-prune": {
        "task": "portal.audit.tasks.audit_prune",
        "schedule": 3600.0,
        "options": {"expires": 3600},
    },
    "audit-syslog": {
        "task": "portal.audit.tasks.audit_syslog",
        "schedule": AUDIT_SYSLOG_SECONDS,
        "options": {"expires": AUDIT_SYSLOG_SECONDS},
    },
    "environments-check": {
        "task": "portal.environments.tasks.environments_check",
        "schedule": ENVIRONMENTS_CHECK_SECONDS,
        "options": {"expires": ENVIRONMENTS_CHECK_SECONDS},
    },
}

# --- Audit trail (portal.audit) ---
# Events older than this many days are deleted by the hourly audit-prune task, the only deletion.
# The database keeps the last 30 days whatever this says (audit_prune()).
AUDIT_RETENTION_DAYS = env.int("AUDIT_RETENTION_DAYS", default=365)
# A GET never writes: requests with these methods only get an audit context.
PGHISTORY_MIDDLEWARE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

# --- REST API ---
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "portal.accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "portal.core.schema.PortalAutoSchema",
    "EXCEPTION_HANDLER": "portal.core.api_errors.exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "portal.core.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_THROTTLE_CLASSES": ["portal.core.throttling.ScopedUserThrottle"],
}
# Per user and scope (portal.core.throttling): API requests that each fork a process or call the hub.
API_THROTTLE_RATES = {
    "job_files": env("API_RATE_JOB_FILES", default="120/min"),  # a job's log, read through job-files
    "slurm": env("API_RATE_SLURM", default="30/min"),  # a Slurm command (scancel, scontrol) per request
    "hub": env("API_RATE_HUB", default="60/min"),  # JupyterHub's REST API
    # Per job, session or app: its report.sh transitions and its GPU sampler's pushes (every 15 s).
    "reports": env("API_RATE_REPORTS", default="60/min"),
}
# A report token is refused once its job, session or app ended more than this long ago.
REPORT_TOKEN_GRACE_MINUTES = env.int("REPORT_TOKEN_GRACE_MINUTES", default=30)
SPECTACULAR_SETTINGS = {
    "TITLE": "gpuportal API",
    "DESCRIPTION": (
        "REST API of the gpuportal GPU cluster portal. Authenticate with a personal token "
        "(`Authorization: Token <key>`, from the profile page or `POST /api/v1/tokens/`) "
        "or a browser session. Errors are JSON: `{\"detail\": message, \"code\": code, "
        "\"fields\": {field: [messages]}}`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Swagger UI's assets come from the installed sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    # Deep links off: Swagger UI puts them inside each operation's button (nested controls, WCAG 4.1.2).
    "SWAGGER_UI_SETTINGS": {"deepLinking": False},
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Hostile bodies: refused before they are decoded (400), never a RecursionError.
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=1024 * 1024)
API_MAX_JSON_DEPTH = env.int("API_MAX_JSON_DEPTH", default=32)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES

LANGUAGE_CODE = "en-us"
TIME_ZONE = env("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = env("STATIC_ROOT", default=str(BASE_DIR / ".static"))
# The charting library, installed by npm ci (scripts/install.sh) from portal/core/charts/package.json:
# only its built bundles are served, never node_modules as a whole, and never from a CDN.
_CHARTS = BASE_DIR / "portal" / "core" / "charts" / "node_modules"
STATICFILES_DIRS = [
    (f"vendor/{name}", _CHARTS / name / "build")
    for name in ("vega", "vega-lite", "vega-embed")
    if (_CHARTS / name / "build").is_dir()
]

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
# Sessions read from the cache (Redis) first, from PostgreSQL after a miss or with Redis down
# (portal.accounts.sessions): a poll answered 304 (portal.core.live) then costs no PostgreSQL query,
# and no login is lost with Redis.
SESSION_ENGINE = "portal.accounts.sessions"

# --- Parts that poll (portal.core.live) ---
# Their ETags move at least this often, so what they derive from the clock is never older.
LIVE_WINDOW_SECONDS = env.int("LIVE_WINDOW_SECONDS", default=30)
# The release, in every ETag (a new one answers in full); empty: the checkout's commit.
PORTAL_BUILD = env("PORTAL_BUILD", default="")

# Every HTML page (portal.core.csp): scripts only from the portal's static files (charts.js renders
# Vega-Lite with vega-embed's interpreter, no eval); styles also inline (style attributes in the
# templates, the stylesheets vega-embed and its tooltips insert): CSS cannot run code. Never framed.
CONTENT_SECURITY_POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'", "'unsafe-inline'"],
    "img-src": ["'self'", "data:"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "frame-ancestors": ["'none'"],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
}

# --- Walltime: the longest job or session on a partition without a time limit (default 7 days) ---
SITE_MAX_WALLTIME_MINUTES = env.int("SITE_MAX_WALLTIME_MINUTES", default=7 * 24 * 60)

# --- Walltime extension (portal.extensions) ---
# A session or job may be extended up to its group's max_hours (POLICY_GROUPS) within its partition's
# limit. With approval on, a request beyond that waits for an admin (admin page: Walltime
# extensions) instead of being refused.
EXTENSIONS_APPROVAL = env.bool("EXTENSIONS_APPROVAL", default=False)

# --- Notifications (portal.notifications): e-mail on job end through Django's mail backend ---
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
EMAIL_TIMEOUT = env.float("EMAIL_TIMEOUT", default=10.0)
EMAIL_HOST_USER = env("EMAIL_HOST_USER", default="")
EMAIL_HOST_PASSWORD = env("EMAIL_HOST_PASSWORD", default="")
EMAIL_USE_TLS = env.bool("EMAIL_USE_TLS", default=False)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="gpuportal@localhost")
# The portal's address as users reach it, for links in mail.
PORTAL_URL = env("PORTAL_URL", default="http://127.0.0.1:8000")

# --- Reports (portal.reports): jobs and sessions report their own transitions ---
# The portal's address as compute nodes reach it: job scripts POST to {this}/api/v1/reports/
# (GPUPORTAL_URL in the job's environment, set at sbatch time with the job's own report token).
PORTAL_URL_FOR_JOBS = env("PORTAL_URL_FOR_JOBS", default=PORTAL_URL)
# After an `exited` report, accounting (sacct) is asked this often, at most this many times, until it
# shows the job's final state (a job that just exited may still read RUNNING or COMPLETING); then the
# poll cycle has it.
REPORTS_SETTLE_SECONDS = env.float("REPORTS_SETTLE_SECONDS", default=0.5)
REPORTS_SETTLE_ATTEMPTS = env.int("REPORTS_SETTLE_ATTEMPTS", default=8)

# --- GPU figures (portal.gpus): each GPU job's sampler reads nvidia-smi and pushes to the reports API ---
GPU_SAMPLE_SECONDS = env.int("GPU_SAMPLE_SECONDS", default=15)  # told to the samplers in each answer
GPU_SAMPLES_PER_REPORT = env.int("GPU_SAMPLES_PER_REPORT", default=1000)  # more: 413
GPU_POINTS_PER_JOB = env.int("GPU_POINTS_PER_JOB", default=2000)  # 1-minute points; the oldest go
GPU_REPORT_GRACE_MINUTES = env.int("GPU_REPORT_GRACE_MINUTES", default=10)  # late samples of an ended job

# --- Efficiency records (portal.efficiency.services): one sacct per poll cycle for all ended work ---
EFFICIENCY_LOOKBACK_HOURS = env.float("EFFICIENCY_LOOKBACK_HOURS", default=48.0)  # work ended before: none
EFFICIENCY_PER_CYCLE = env.int("EFFICIENCY_PER_CYCLE", default=2000)  # records per cycle, the oldest first
EFFICIENCY_GPU_BUSY_PERCENT = env.float("EFFICIENCY_GPU_BUSY_PERCENT", default=10.0)  # a GPU's mean: busy
# A job's reported mean GPU use this many points away from Slurm's own gres/gpuutil: admins are told.
EFFICIENCY_GPU_CHECK_POINTS = env.float("EFFICIENCY_GPU_CHECK_POINTS", default=25.0)

# --- Efficiency advice (portal.efficiency.advice): what an ended job or session should ask for next ---
# CPU advice when the cores were busy less than this share (%) of the run, on average.
EFFICIENCY_CPU_ADVICE_PERCENT = env.float("EFFICIENCY_CPU_ADVICE_PERCENT", default=50.0)
# Memory advice when the peak stayed under this share (%) of the memory asked for.
EFFICIENCY_MEMORY_ADVICE_PERCENT = env.float("EFFICIENCY_MEMORY_ADVICE_PERCENT", default=50.0)
# Time advice when the run used less than this share (%) of its time limit.
EFFICIENCY_TIME_ADVICE_PERCENT = env.float("EFFICIENCY_TIME_ADVICE_PERCENT", default=50.0)
# A run shorter than this (minutes) gets no memory or time advice: too short to judge.
EFFICIENCY_SHORT_RUN_MINUTES = env.float("EFFICIENCY_SHORT_RUN_MINUTES", default=5.0)

# --- Experiment tracking (portal.tracking, MLflow's REST API at /api/2.0/mlflow/; docs/tracking.md) ---
# Where each new experiment's artifacts go ({home}, {username}): the MLflow client writes them there
# itself, as the user, so it must be a folder of theirs.
TRACKING_ARTIFACT_ROOT = env("TRACKING_ARTIFACT_ROOT", default="{home}/gpuportal/mlruns")
# A job's or session's tracking token (MLFLOW_TRACKING_TOKEN) still works this long after it ended.
TRACKING_TOKEN_GRACE_SECONDS = env.int("TRACKING_TOKEN_GRACE_SECONDS", default=600)
# Idle GPUs (portal.gpus.idle): the defaults under the admin's IdlePolicy rows. A session whose GPUs all
# stay under IDLE_GPUS_UTIL_PERCENT for IDLE_GPUS_WINDOW_MINUTES, with no kernel busy and no terminal
# command running, is warned, and stopped IDLE_GPUS_GRACE_MINUTES later; batch jobs are only flagged.
IDLE_GPUS_ENABLED = env.bool("IDLE_GPUS_ENABLED", default=True)
IDLE_GPUS_UTIL_PERCENT = env.float("IDLE_GPUS_UTIL_PERCENT", default=5.0)
IDLE_GPUS_WINDOW_MINUTES = env.float("IDLE_GPUS_WINDOW_MINUTES", default=30.0)
IDLE_GPUS_GRACE_MINUTES = env.float("IDLE_GPUS_GRACE_MINUTES", default=15.0)
IDLE_GPUS_EMAIL = env.bool("IDLE_GPUS_EMAIL", default=False)  # also mail a warning or a job flag to its owner

# --- Prometheus metrics (portal.metrics, GET /metrics; docs/admin/metrics.md) ---
# GPU gauges are computed at scrape time over this many minutes of the samplers' 1-minute points.
METRICS_GPU_WINDOW_MINUTES = env.int("METRICS_GPU_WINDOW_MINUTES", default=5)
# A sampled GPU whose mean utilisation over that window is at least this counts as busy.
METRICS_GPU_BUSY_PERCENT = env.float("METRICS_GPU_BUSY_PERCENT", default=5.0)
# Request and task counters every process adds to (portal.metrics.store): the cache's Redis by default.
METRICS_REDIS_URL = env("METRICS_REDIS_URL", default=CACHES["default"]["LOCATION"])
METRICS_KEY_PREFIX = env("METRICS_KEY_PREFIX", default="gpuportal:metrics")
# A new scrape token expires after this many days unless its creator says otherwise (0: never).
METRICS_SCRAPE_TOKEN_DAYS = env.int("METRICS_SCRAPE_TOKEN_DAYS", default=365)

# --- Batch jobs (portal.jobs) ---
# One folder per template (template.toml + script.sh.j2); checked at startup.
JOBS_TEMPLATES_DIR = env("JOBS_TEMPLATES_DIR", default=str(BASE_DIR / "templates" / "jobs"))
# Where a user's job output goes on the cluster; {home} is the user's home directory.
JOBS_OUTPUT_DIR = env("JOBS_OUTPUT_DIR", default="{home}/gpuportal/jobs")
# Re-run exactly (portal.provenance.rerun): an environment whose lock changed since the run is rebuilt
# from the recorded lock by the re-run job, as its user, into ~/.cache/gpuportal/envs/<lock hash>.
# False: such a re-run is refused (409) with the reason.
PROVENANCE_REBUILD_ENVS = env.bool("PROVENANCE_REBUILD_ENVS", default=True)
# A job's TensorBoard log directory (TENSORBOARD_LOGDIR in its script); {uuid} is the job's.
JOBS_TENSORBOARD_LOGDIR = env("JOBS_TENSORBOARD_LOGDIR", default="{home}/logs/jobs/{uuid}")
# The notebook templates folder the hub's sessions copy into ~/templates (HUB_TEMPLATES_DIR): batch
# jobs copy it too, so the training templates' default script is there. Empty: jobs copy nothing.
NOTEBOOK_TEMPLATES_DIR = env("NOTEBOOK_TEMPLATES_DIR", default="/var/lib/gpuportal/notebook-templates")
# The largest metrics file (job-<uuid>.metrics.json) the portal reads when a job ends.
JOBS_METRICS_MAX_BYTES = env.int("JOBS_METRICS_MAX_BYTES", default=4 * 1024 * 1024)
JOBS_DEFAULT_TIME_MINUTES = env.int("JOBS_DEFAULT_TIME_MINUTES", default=8 * 60)
# A submission that found Slurm unreachable is retried by the poll cycle after this long.
JOBS_RETRY_SECONDS = env.float("JOBS_RETRY_SECONDS", default=SLURM_TIMEOUT_SECONDS + 10)
# Whoever submits a job holds it this long: longer than the worst case of the two Slurm calls it
# covers (mkdir and sbatch as the user, each killed at SLURM_TIMEOUT_SECONDS), so a claim never
# runs out while its sbatch may still be running.
JOBS_SUBMIT_LEASE_SECONDS = env.float("JOBS_SUBMIT_LEASE_SECONDS", default=2 * SLURM_TIMEOUT_SECONDS + 30)
JOBS_LOG_CHUNK_BYTES = 64 * 1024

# --- Notebook servers (portal.sessions) through JupyterHub (spawners/), which logs in via OAuth2 ---
# The hub's public address (its proxy) and REST API; the token is the hub's "portal" service token.
JUPYTERHUB_URL = env("JUPYTERHUB_URL", default="http://127.0.0.1:8001")
JUPYTERHUB_API_URL = env("JUPYTERHUB_API_URL", default="http://127.0.0.1:8081/hub/api")
# Both shared with the hub; generated by `make up` (spawners/hub.sh secrets), no defaults.
JUPYTERHUB_API_TOKEN = env("JUPYTERHUB_API_TOKEN", default="")
JUPYTERHUB_TIMEOUT_SECONDS = env.float("JUPYTERHUB_TIMEOUT_SECONDS", default=15.0)
JUPYTERHUB_OAUTH_CLIENT_ID = env("JUPYTERHUB_OAUTH_CLIENT_ID", default="jupyterhub")
JUPYTERHUB_OAUTH_CLIENT_SECRET = env("JUPYTERHUB_OAUTH_CLIENT_SECRET", default="")
OAUTH2_PROVIDER = {
    "SCOPES": {"profile": "Your user name, e-mail address and groups"},
    "DEFAULT_SCOPES": ["profile"],
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    # The hub refreshes its login with this; it must end too (default 1 day).
    "REFRESH_TOKEN_EXPIRE_SECONDS": env.int("OAUTH_REFRESH_TOKEN_EXPIRE_SECONDS", default=86400),
    "PKCE_REQUIRED": True,
}

# --- One policy for sessions and jobs (portal.policy): published as POLICY_FILE for the hub ---
# CPUs and memory per node that come with each GPU (and what a session or job without GPUs gets),
# per partition; "*" applies to partitions not named.
POLICY_PARTITION_RESOURCES = {
    "*": {"cpus_per_gpu": 8, "mem_gb_per_gpu": 48, "cpus_without_gpu": 2, "mem_gb_without_gpu": 8},
}
# Defaults and maxima per LDAP group (the most generous of a user's groups applies; "*": anybody in
# no group named here): max_gpus and max_sessions at once, max_hours per session or job, partitions
# and environments allowed (null: all), default_gpus, default_hours.
POLICY_GROUPS = env.json("POLICY_GROUPS", default={"*": {
    "max_gpus": env.int("HUB_MAX_GPUS_PER_USER", default=4),
    "max_sessions": env.int("HUB_SERVERS_PER_USER", default=3),
    "max_hours": SITE_MAX_WALLTIME_MINUTES / 60,
    "default_hours": env.float("SERVERS_DEFAULT_HOURS", default=8.0),
}})
# Written by the portal (poll cycle, profile changes, `manage.py policy_publish`), read by the hub.
POLICY_FILE = env("GPUPORTAL_POLICY_FILE", default=str(_STATE / "policy" / "policy.json"))
# Each poll cycle's squeue of the hub's jobs, which the hub answers routine server polls from.
SERVERS_QUEUE_FILE = env("GPUPORTAL_QUEUE_FILE", default=str(_STATE / "policy" / "queue.json"))
# A session the hub has not accepted yet is handed to Celery again after this long, at most this often.
SERVERS_SPAWN_RETRY_SECONDS = env.float("SERVERS_SPAWN_RETRY_SECONDS",
                                        default=JUPYTERHUB_TIMEOUT_SECONDS + 10)
SERVERS_SPAWN_ATTEMPTS = 3
# The hub's idle culler stops a server after this long without activity (spawners/hub.sh).
SERVERS_IDLE_TIMEOUT_SECONDS = env.int("HUB_CULL_TIMEOUT", default=3600)
# Job states share the field name `state` with other apps' enums: name them in the schema.
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {})["JobStateEnum"] = "portal.jobs.models.JobState"
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]["ExtensionStateEnum"] = \
    "portal.extensions.models.ExtensionRequest.State"
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]["AppStateEnum"] = "portal.webapps.models.AppState"
# Sessions or jobs: the kinds of presets and the targets of extensions.
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"]["LaunchKindEnum"] = "portal.launches.models.Preset.Kind"
# The composer's and the session form's suggestion: the user's newest this many runs of a template or profile.
EFFICIENCY_SUGGEST_RUNS = env.int("EFFICIENCY_SUGGEST_RUNS", default=10)
# Fewer runs than this make no suggestion: one odd run is no guide.
EFFICIENCY_SUGGEST_MIN_RUNS = env.int("EFFICIENCY_SUGGEST_MIN_RUNS", default=3)
