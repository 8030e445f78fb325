"""The apps gateway's production settings: gateway.py with production's checks on what it holds
(APPS_SIGNING_KEY, APPS_ORIGIN, its database URL), from the same functions as the portal's
(checks.py). DJANGO_SETTINGS_MODULE=portal.settings.gateway_production
(deploy/apps-gateway.env.example)."""

from .checks import apps_origin_problem, connections_check, database_problem, secrets_check
from .gateway import *  # noqa: F403
from .gateway import ALLOWED_HOSTS, APPS_ORIGIN, APPS_SIGNING_KEY, DATABASES, JUPYTERHUB_URL, env

DEBUG = False

secrets_check({"APPS_SIGNING_KEY": APPS_SIGNING_KEY})
connections_check([
    apps_origin_problem(APPS_ORIGIN, ALLOWED_HOSTS, JUPYTERHUB_URL),
    database_problem(env("DATABASE_URL", default=""), DATABASES["default"]["USER"],
                     DATABASES["default"]["PASSWORD"]),
])
