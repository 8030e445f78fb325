"""Production settings: base.py behind a TLS-terminating proxy (deploy/nginx/gpuportal.conf).

DJANGO_SETTINGS_MODULE=portal.settings.production (deploy/gpuportal.env.example). Refuses to start
(ImproperlyConfigured) when DJANGO_SECRET_KEY or the secrets shared with the hub are missing, short
or well known, when users' passwords would go to the directory in clear, or when the database has no
URL of its own or the test bed's credentials, so a copied example file or a forgotten variable never
reaches users.
"""

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from publicsuffixlist import PublicSuffixList

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

# --- secrets: refuse what is missing, short or well known ---
MIN_SECRET_LENGTH = 50
# Fallbacks this project once shipped, and what example files and tutorials say.
KNOWN_SECRETS = frozenset({
    "dev-only-insecure-key-change-me", "dev-only-hub-api-token", "dev-only-hub-oauth-secret",
    "dev-only-hub-culler-token",
})
KNOWN_MARKERS = ("change-me", "changeme", "change_me", "dev-only", "test-only", "insecure", "example",
                 "secret-key", "placeholder")


def secret_problem(value: str) -> str:
    """Why `value` is no secret, or "" when it may be one."""
    if not value:
        return "is not set"
    if len(value) < MIN_SECRET_LENGTH:
        return f"is shorter than {MIN_SECRET_LENGTH} characters"
    lowered = value.lower()
    if value in KNOWN_SECRETS or any(marker in lowered for marker in KNOWN_MARKERS):
        return "is a well-known default"
    if len(set(value)) < 5:
        return "has fewer than 5 distinct characters"
    return ""


def secrets_check(values: dict[str, str]) -> None:
    """Raise ImproperlyConfigured naming every unusable secret (never its value)."""
    problems = [f"{name} {problem}" for name, value in values.items() if (problem := secret_problem(value))]
    if problems:
        raise ImproperlyConfigured(
            "refusing to start with unusable secrets: " + "; ".join(problems)
            + ". Generate them (e.g. `openssl rand -hex 32`) into the environment file, mode 0600 "
              "(deploy/gpuportal.env.example; `make up` does it for the local cluster)."
        )


secrets_check({
    "DJANGO_SECRET_KEY": SECRET_KEY,
    "JUPYTERHUB_API_TOKEN": JUPYTERHUB_API_TOKEN,
    "JUPYTERHUB_OAUTH_CLIENT_SECRET": JUPYTERHUB_OAUTH_CLIENT_SECRET,
    "APPS_SIGNING_KEY": APPS_SIGNING_KEY,
})
if APPS_SIGNING_KEY == SECRET_KEY:
    raise ImproperlyConfigured("refusing to start: APPS_SIGNING_KEY must differ from DJANGO_SECRET_KEY (the "
                               "apps gateway holds it).")


# --- the directory and the database: no password in clear to the directory, no test bed credentials ---
def ldap_problem(uri: str, start_tls: bool) -> str:
    """Why logins to `uri` would send users' passwords in clear, or "" when they would not."""
    scheme = urlsplit(uri).scheme.lower()
    if scheme in ("ldaps", "ldapi") or (scheme == "ldap" and start_tls):
        return ""
    if scheme == "ldap":
        return ("LDAP_URI is ldap:// without LDAP_START_TLS=true: users' passwords would go to the "
                "directory in clear (use ldaps://, LDAP_START_TLS=true, or ldapi:// on this host)")
    return "LDAP_URI is not an ldaps://, ldap:// or ldapi:// URI"


def database_problem(url: str, user: str, password: str) -> str:
    """Why the database settings are the test bed's, or "" when they are a site's own."""
    if not url:
        return ("DATABASE_URL is not set (the built-in default is the local test bed's, with its "
                "well-known password)")
    lowered = password.lower()
    if password and (password == user or any(marker in lowered for marker in KNOWN_MARKERS)):
        return "DATABASE_URL has a well-known password (the test bed's, or a placeholder)"
    return ""


def registrable_domain(host: str) -> str:
    """The domain a host's owner registered (example.org for gpu.example.org, by the Public Suffix
    List the package ships: no download); the host itself for an IP address or a bare name."""
    host = host.lower().strip(".")
    return PublicSuffixList().privatesuffix(host) or host


def apps_origin_problem(origin: str, portal_hosts: list[str], hub_url: str) -> str:
    """Why users' web apps would not have a site of their own, or "" when they would: https, and a
    registrable domain that neither the portal's hosts nor the hub's share, as GitHub serves users'
    content from githubusercontent.com. On the same site an app could set cookies for the portal's
    domain (`Domain=`), and its pages would count as same-site for SameSite cookies."""
    parts = urlsplit(origin)
    if parts.scheme != "https" or not parts.hostname:
        return "APPS_ORIGIN must be https://<a host name of its own> (deploy/gpuportal.env.example)"
    site = registrable_domain(parts.hostname)
    hosts = [name.lstrip(".") for name in portal_hosts if name not in ("*", "")]
    hosts += [host] if (host := urlsplit(hub_url).hostname) else []
    if shared := sorted({host for host in hosts if registrable_domain(host) == site}):
        return (f"APPS_ORIGIN must be on a registrable domain of its own, not {site}, which "
                f"{', '.join(shared)} is on (e.g. https://apps.gpu-usercontent.example.net)")
    return ""


def connections_check(problems: list[str]) -> None:
    """Raise ImproperlyConfigured naming every unusable setting (never a password)."""
    if problems := [problem for problem in problems if problem]:
        raise ImproperlyConfigured("refusing to start: " + "; ".join(problems) + ".")


connections_check([
    ldap_problem(LDAP_URI, LDAP_START_TLS),
    apps_origin_problem(APPS_ORIGIN, ALLOWED_HOSTS, JUPYTERHUB_URL),
    database_problem(env("DATABASE_URL", default=""), DATABASES["default"]["USER"],
                     DATABASES["default"]["PASSWORD"]),
])
