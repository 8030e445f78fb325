"""The LDAP adapter against the real slapd that `make test` starts."""

import pytest

from portal.accounts import ldap
from tests.ports import free_port


def test_alice_binds_and_gets_attributes_and_groups():
    alice = ldap.authenticate("alice", "alice-pw")
    assert alice.dn == "uid=alice,ou=people,dc=gpuportal,dc=test"
    assert alice.uid_number == 10001 and alice.home_directory == "/home/alice"
    assert alice.email == "alice@gpuportal.test"
    assert alice.groups == {"portal-users"}


def test_admin_groups():
    assert ldap.authenticate("ada", "ada-pw").groups == {"portal-users", "portal-admins"}


@pytest.mark.parametrize(("username", "password"), [
    ("alice", ""),            # empty password: would be an anonymous bind
    ("alice", "wrong"),
    ("nobody", "alice-pw"),   # unknown user
    ("*", "alice-pw"),
    ("*", ""),
    (")(uid=*", "alice-pw"),
    ("alice)(uid=*", "alice-pw"),
    ("uid=alice,ou=people", "alice-pw"),
    ("alice\x00", "alice-pw"),
])
def test_refused(username, password):
    with pytest.raises(ldap.InvalidCredentials):
        ldap.authenticate(username, password)


def test_directory_down_is_unavailable_not_invalid(settings):
    settings.LDAP_URI = f"ldap://127.0.0.1:{free_port()}"
    settings.LDAP_TIMEOUT_SECONDS = 1
    with pytest.raises(ldap.DirectoryUnavailable):
        ldap.authenticate("alice", "alice-pw")
