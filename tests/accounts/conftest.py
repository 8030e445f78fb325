"""The shared directory's admin access, and bob leaving portal-users for a test."""

import subprocess

import pytest

from tests.conftest import DEMO_PASSWORDS

SUFFIX = "dc=gpuportal,dc=test"
LDAP = ["-x", "-H", "ldap://127.0.0.1:3389", "-D", f"cn=admin,{SUFFIX}", "-w", "ldap-admin"]


def _membership(change: str, uid: str) -> None:
    ldif = (f"dn: cn=portal-users,ou=groups,{SUFFIX}\nchangetype: modify\n{change}: member\n"
            f"member: uid={uid},ou=people,{SUFFIX}\n")
    subprocess.run(["ldapmodify", *LDAP], input=ldif, text=True, check=True, capture_output=True)


@pytest.fixture
def bob_leaves():
    """Takes bob out of portal-users when called; he is always put back after the test, or at once
    by `bob_leaves.restore()` (others share the directory)."""
    left = []

    def leave() -> None:
        _membership("delete", "bob")
        left.append(True)

    def restore() -> None:
        if left:
            _membership("add", "bob")
            left.clear()

    leave.restore = restore
    try:
        yield leave
    finally:
        restore()


def token_of(api_client, user):
    response = api_client.post("/api/v1/tokens/", {"username": user, "password": DEMO_PASSWORDS[user]},
                               format="json")
    assert response.status_code == 201, response.content
    return response.json()["token"]
