"""The checks production settings run before anything starts (production.py for the portal,
gateway_production.py for the apps gateway): each names what is unusable, never a secret's value.
Plain functions of their inputs, so each process's settings call the ones that apply to it."""

from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured
from publicsuffixlist import PublicSuffixList

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
              "(deploy/gpuportal.env.example, deploy/apps-gateway.env.example; `make up` does it for "
              "the local cluster)."
        )


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


