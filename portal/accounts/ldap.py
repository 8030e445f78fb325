"""The LDAP adapter: the only code that talks to the directory.

Login binds as the user (the DN comes from a template, so no search account is needed), then
reads the user's own entry and the groups that list the user as a member.
"""

import logging
import re
import ssl
from dataclasses import dataclass

import ldap3
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from ldap3.core import exceptions as ldap_exc
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn, parse_dn

logger = logging.getLogger(__name__)

# POSIX-portable login names; anything else can never be a Unix account a job runs as.
USERNAME_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")

# Only these mean "the directory could not be asked": everything else is about the request.
_OUTAGES = (
    ldap_exc.LDAPCommunicationError,  # socket open/send/receive, session terminated
    ldap_exc.LDAPResponseTimeoutError,
    ldap_exc.LDAPServerPoolExhaustedError,
    ldap_exc.LDAPStartTLSError,
    ldap_exc.LDAPSSLConfigurationError,
    ldap_exc.LDAPUnavailableResult,
    ldap_exc.LDAPBusyResult,
    ldap_exc.LDAPTimeLimitExceededResult,
    ldap_exc.LDAPAdminLimitExceededResult,
    ldap_exc.LDAPOperationsErrorResult,
    ldap_exc.LDAPOtherResult,
)


class DirectoryUnavailable(Exception):
    """The directory could not be reached or answered with an error that is not about the user."""


class InvalidCredentials(Exception):
    """Unknown user, wrong or empty password, or a name that cannot be an account."""


@dataclass(frozen=True)
class DirectoryUser:
    username: str
    dn: str
    first_name: str
    last_name: str
    full_name: str
    email: str
    uid_number: int | None
    gid_number: int | None
    home_directory: str
    groups: frozenset[str]


def _timeout() -> int:
    # ldap3 packs timeouts into socket options as whole seconds.
    return max(1, round(settings.LDAP_TIMEOUT_SECONDS))


def _tls() -> ldap3.Tls | None:
    """Certificate checks for ldaps:// and StartTLS: against LDAP_CA_FILE, or the system's CAs."""
    if not (settings.LDAP_URI.startswith("ldaps://") or settings.LDAP_START_TLS):
        return None
    return ldap3.Tls(validate=ssl.CERT_REQUIRED, version=ssl.PROTOCOL_TLS_CLIENT,
                     ca_certs_file=settings.LDAP_CA_FILE or None)


def _server() -> ldap3.Server:
    return ldap3.Server(settings.LDAP_URI, connect_timeout=_timeout(), get_info=ldap3.NONE, tls=_tls())


def _connection(user: str | None = None, password: str | None = None) -> ldap3.Connection:
    connection = ldap3.Connection(_server(), user=user, password=password, receive_timeout=_timeout(),
                                  raise_exceptions=True, read_only=True)
    if settings.LDAP_START_TLS:
        connection.open()
        connection.start_tls()
    return connection


def _classified(error: ldap_exc.LDAPException) -> Exception:
    """An outage (DirectoryUnavailable), or bad credentials for anything about the request:
    a control character in a password is a wrong password (and counts towards the lockout)."""
    if isinstance(error, _OUTAGES):
        return DirectoryUnavailable(str(error))
    if not isinstance(error, ldap_exc.LDAPInvalidCredentialsResult | ldap_exc.LDAPNoSuchObjectResult):
        logger.warning("LDAP refused a login with %s: %s", type(error).__name__, error)
    return InvalidCredentials()


def _first(entry: dict, name: str, default: str = "") -> str:
    values = entry.get(name) or []
    if isinstance(values, list):
        return str(values[0]) if values else default
    return str(values)


def _int_or_none(value: str) -> int | None:
    return int(value) if value.lstrip("-").isdigit() else None


def authenticate(username: str, password: str) -> DirectoryUser:
    """Bind as `username` and return what the directory says about them."""
    # An empty password would be an anonymous "success" (RFC 4513 5.1.2): refuse before binding.
    if not password or not USERNAME_RE.fullmatch(username):
        raise InvalidCredentials
    base = settings.LDAP_BASE_DN
    user_dn = settings.LDAP_USER_DN_TEMPLATE.format(username=escape_rdn(username), base=base)
    try:
        connection = _connection(user_dn, password)
    except ldap_exc.LDAPException as error:
        raise _classified(error) from error
    try:
        connection.bind()
        connection.search(
            user_dn,
            f"(uid={escape_filter_chars(username)})",
            search_scope=ldap3.BASE,
            attributes=["uid", "cn", "givenName", "sn", "mail", "uidNumber", "gidNumber",
                        "homeDirectory"],
        )
        if not connection.response:
            raise InvalidCredentials
        attrs = connection.response[0]["attributes"]
        connection.search(
            settings.LDAP_GROUP_BASE.format(base=base),
            f"(&(objectClass=groupOfNames)(member={escape_filter_chars(user_dn)}))",
            attributes=["cn"],
        )
        groups = frozenset(_first(item["attributes"], "cn") for item in connection.response)
    except ldap_exc.LDAPException as error:
        raise _classified(error) from error
    finally:
        connection.unbind()
    return DirectoryUser(
        username=username,
        dn=user_dn,
        first_name=_first(attrs, "givenName"),
        last_name=_first(attrs, "sn"),
        full_name=_first(attrs, "cn"),
        email=_first(attrs, "mail"),
        uid_number=_int_or_none(_first(attrs, "uidNumber")),
        gid_number=_int_or_none(_first(attrs, "gidNumber")),
        home_directory=_first(attrs, "homeDirectory"),
        groups=groups,
    )


@dataclass(frozen=True)
class GroupMembers:
    usernames: frozenset[str]
    # Member DNs that name no user: neither the login DN template's shape nor an entry with the
    # template's naming attribute (a deleted user, a nested group). Logged, never taken as nobody.
    unresolved: tuple[str, ...] = ()


# Stands for the username while the login DN template is parsed; a DN value may contain braces.
_USERNAME_SLOT = "{username}"


def _user_dn_shape() -> tuple[str, list[tuple[str, str]]]:
    """The login DN template (LDAP_USER_DN_TEMPLATE) as its naming attribute (e.g. `uid`) and its
    RDNs, lowercased, with the username's value as _USERNAME_SLOT."""
    template = settings.LDAP_USER_DN_TEMPLATE.format(username=_USERNAME_SLOT, base=settings.LDAP_BASE_DN)
    try:
        rdns = [(kind.lower(), value.lower()) for kind, value, _ in parse_dn(template, strip=True)]
    except ldap_exc.LDAPInvalidDnError as error:
        raise ImproperlyConfigured(f"LDAP_USER_DN_TEMPLATE is not a DN: {error}") from error
    slots = [kind for kind, value in rdns if value == _USERNAME_SLOT]
    if len(slots) != 1:
        raise ImproperlyConfigured("LDAP_USER_DN_TEMPLATE must name the user with one attr={username}")
    return slots[0], rdns


def _username_of(dn: str, rdns: list[tuple[str, str]]) -> str | None:
    """The username of a member DN shaped like the login DN template (attribute names and the
    fixed values compared case-insensitively, as the directory does); None for any other DN."""
    try:
        parsed = [(kind.lower(), value) for kind, value, _ in parse_dn(dn, strip=True)]
    except ldap_exc.LDAPInvalidDnError:
        return None
    if len(parsed) != len(rdns):
        return None
    username = None
    for (kind, value), (want_kind, want_value) in zip(parsed, rdns, strict=True):
        if kind != want_kind:
            return None
        if want_value == _USERNAME_SLOT:
            username = value.lower()
        elif value.lower() != want_value:
            return None
    return username if username is not None and USERNAME_RE.fullmatch(username) else None


def _username_looked_up(connection: ldap3.Connection, dn: str, attribute: str) -> str | None:
    """Read the naming attribute of the entry a member DN names (a user listed by another DN than
    the template's, e.g. `cn=Bob Builder,ou=people,...`); None if there is no such user entry."""
    try:
        connection.search(dn, "(objectClass=*)", search_scope=ldap3.BASE, attributes=[attribute])
    except _OUTAGES as error:
        raise DirectoryUnavailable(str(error)) from error
    except ldap_exc.LDAPException:  # no such entry, a DN the server cannot parse, no access
        return None
    if not connection.response:
        return None
    username = _first(connection.response[0].get("attributes") or {}, attribute).lower()
    return username if USERNAME_RE.fullmatch(username) else None


def group_members(group: str) -> GroupMembers:
    """The users listed in `group` (a groupOfNames), read with the directory's search account
    (LDAP_BIND_DN; anonymous when empty). A member DN shaped like the login DN template gives its
    username at once; any other is looked up. Raises DirectoryUnavailable: a caller must never
    take an outage for "nobody is a member"."""
    attribute, rdns = _user_dn_shape()
    usernames: set[str] = set()
    unresolved: list[str] = []
    try:
        connection = _connection(settings.LDAP_BIND_DN or None, settings.LDAP_BIND_PASSWORD or None)
        connection.bind()
        try:
            connection.search(settings.LDAP_GROUP_BASE.format(base=settings.LDAP_BASE_DN),
                              f"(&(objectClass=groupOfNames)(cn={escape_filter_chars(group)}))",
                              attributes=["member"])
            entries = list(connection.response)
            if not entries:
                raise DirectoryUnavailable(f"group {group!r} not found under {settings.LDAP_GROUP_BASE}")
            for dn in (str(dn) for entry in entries for dn in entry["attributes"].get("member", [])):
                username = _username_of(dn, rdns) or _username_looked_up(connection, dn, attribute)
                if username is None:
                    unresolved.append(dn)
                else:
                    usernames.add(username)
        finally:
            connection.unbind()
    except ldap_exc.LDAPException as error:
        raise DirectoryUnavailable(str(error)) from error
    if unresolved:
        logger.warning("group %s: %d member DN(s) name no user and were not counted: %s", group,
                       len(unresolved), "; ".join(unresolved[:20]))
    return GroupMembers(usernames=frozenset(usernames), unresolved=tuple(unresolved))
