"""Production settings: base.py behind a TLS-terminating proxy (deploy/nginx/gpuportal.conf).

DJANGO_SETTINGS_MODULE=portal.settings.production (deploy/gpuportal.env.example). Refuses to start
(ImproperlyConfigured) when DJANGO_SECRET_KEY or the secrets shared with the hub are missing, short
or well known, when users' passwords would go to the directory in clear, or when the database has no
URL of its own or the test bed's credentials, so a copied example file or a forgotten variable never
reaches users.
"""

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import (
    ALLOWED_HOSTS,
    APPS_ORIGIN,
    APPS_SIGNING_KEY,
    DATABASES,
    JUPYTERHUB_API_TOKEN,
    JUPYTERHUB_OAUTH_CLIENT_SECRET,
    JUPYTERHUB_URL,
    LDAP_START_TLS,
    LDAP_URI,
    OAUTH2_PROVIDER,
    SECRET_KEY,
    env,
)
from .checks import apps_origin_problem, connections_check, database_problem, ldap_problem, secrets_check

DEBUG = False

# --- HTTPS only: nginx terminates TLS and says so in X-Forwarded-Proto (and overwrites it) ---
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
# __Host-: the browser keeps them only when Secure, Path=/ and without Domain, so nothing on a sibling
# host (a user's app under the same registrable domain) can plant or shadow the portal's cookies.
SESSION_COOKIE_NAME = "__Host-sessionid"
CSRF_COOKIE_NAME = "__Host-csrftoken"
SECURE_HSTS_SECONDS = env.int("DJANGO_HSTS_SECONDS", default=365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", default=True)
# Only allows listing in browsers' preload lists; nothing is submitted by sending it.
SECURE_HSTS_PRELOAD = env.bool("DJANGO_HSTS_PRELOAD", default=True)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
# The public origin(s), e.g. https://gpu.example.org: CSRF checks the Origin header against them.
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# --- the portal as OAuth2 provider (for the hub): RFC 9700's current practice, https callbacks only ---
OAUTH2_PROVIDER = {
    **OAUTH2_PROVIDER,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["https"],
}

# --- refuse unusable secrets, passwords in clear to the directory, the test bed's database ---
secrets_check({
    "DJANGO_SECRET_KEY": SECRET_KEY,
    "JUPYTERHUB_API_TOKEN": JUPYTERHUB_API_TOKEN,
    "JUPYTERHUB_OAUTH_CLIENT_SECRET": JUPYTERHUB_OAUTH_CLIENT_SECRET,
    "APPS_SIGNING_KEY": APPS_SIGNING_KEY,
})
if APPS_SIGNING_KEY == SECRET_KEY:
    raise ImproperlyConfigured("refusing to start: APPS_SIGNING_KEY must differ from DJANGO_SECRET_KEY (the "
                               "apps gateway holds it).")
connections_check([
    ldap_problem(LDAP_URI, LDAP_START_TLS),
    apps_origin_problem(APPS_ORIGIN, ALLOWED_HOSTS, JUPYTERHUB_URL),
    database_problem(env("DATABASE_URL", default=""), DATABASES["default"]["USER"],
                     DATABASES["default"]["PASSWORD"]),
])
