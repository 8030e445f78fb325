"""The apps gateway's settings (manage.py apps_gateway): base.py as the gateway's own environment file
gives it (deploy/apps-gateway.env.example; on the local cluster, scripts/up.sh writes it), which holds
its database role, APPS_SIGNING_KEY and APPS_ORIGIN, and none of the portal's or the hub's secrets: a
gateway taken over reads users' apps, not their sessions, tokens or jobs.
DJANGO_SETTINGS_MODULE=portal.settings.gateway on the local cluster; gateway_production in production.
"""

import os
import secrets

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import APPS_SIGNING_KEY

# The portal's and the hub's secrets: a gateway started with the portal's environment file (the old
# layout) refuses to run rather than hold them.
FOREIGN_SECRETS = ("DJANGO_SECRET_KEY", "JUPYTERHUB_API_TOKEN", "JUPYTERHUB_OAUTH_CLIENT_SECRET",
                   "LDAP_BIND_PASSWORD")
if held := [name for name in FOREIGN_SECRETS if os.environ.get(name)]:
    raise ImproperlyConfigured(f"refusing to start: the apps gateway must not hold {', '.join(held)}; give "
                               "it its own environment file (deploy/apps-gateway.env.example).")
if not APPS_SIGNING_KEY:
    raise ImproperlyConfigured("refusing to start: APPS_SIGNING_KEY is not set (the portal's grants and the "
                               "apps' cookies are signed with it).")
# Django wants one; nothing the gateway makes or checks is signed with it (grants and app cookies
# use APPS_SIGNING_KEY), so a random one per process does, and no key is shared with the portal.
SECRET_KEY = secrets.token_hex(32)
