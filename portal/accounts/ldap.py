"""The LDAP adapter: the only code that talks to the directory.

Login binds as the user (the DN comes from a template, so no search account is needed), then
reads the user's own entry and the groups that list the user as a member.
"""

import re
from dataclasses import dataclass

import ldap3
from django.conf import settings
from ldap3.core import exceptions as ldap_exc
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn

# POSIX-portable login names; anything else can never be a Unix account a job runs as.
USERNAME_RE = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


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


def _server() -> ldap3.Server:
    return ldap3.Server(settings.LDAP_URI, connect_timeout=_timeout(), get_info=ldap3.NONE)


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
    connection = ldap3.Connection(
        _server(),
        user=user_dn,
        password=password,
        receive_timeout=_timeout(),
        raise_exceptions=True,
        read_only=True,
    )
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
    except ldap_exc.LDAPInvalidCredentialsResult as error:
        raise InvalidCredentials from error
    except ldap_exc.LDAPNoSuchObjectResult as error:
        raise InvalidCredentials from error
    except ldap_exc.LDAPException as error:
        raise DirectoryUnavailable(str(error)) from error
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
