"""Directory sync without the directory: member DNs read by the login DN template, and the cap on
mass deprovisioning (a stand-in for the group's members)."""

import pytest
from django.core import mail
from django.core.exceptions import ImproperlyConfigured

from portal.accounts import ldap
from portal.accounts.models import User
from portal.accounts.services import directory_sync
from portal.notifications.models import AdminNotice
from tests.factories import UserFactory

BASE = "dc=gpuportal,dc=test"


@pytest.fixture(autouse=True)
def _no_hub(settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # deprovisioning tells a (closed) hub
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


@pytest.mark.parametrize(("dn", "username"), [
    (f"uid=bob,ou=people,{BASE}", "bob"),
    ("UID=Bob, OU=People,DC=GPUPortal,DC=test", "bob"),  # the directory compares these case-blind
    (f"uid=bob.smith_2,ou=people,{BASE}", "bob.smith_2"),
    (f"cn=Bob Builder,ou=people,{BASE}", None),  # another naming attribute: looked up instead
    (f"uid=bob,ou=staff,{BASE}", None),
    (f"uid=bob,{BASE}", None),
    (f"uid=bob+cn=Bob,ou=people,{BASE}", None),
    (f"uid=bob\\2C x,ou=people,{BASE}", None),  # no POSIX name
    ("not a dn", None),
    ("", None),
])
def test_member_dns_are_read_by_the_login_template(dn, username):
    _, rdns = ldap._user_dn_shape()
    assert ldap._username_of(dn, rdns) == username


def test_a_cn_template_reads_cn_members(settings):
    settings.LDAP_USER_DN_TEMPLATE = "cn={username},ou=staff,{base}"
    attribute, rdns = ldap._user_dn_shape()
    assert attribute == "cn"
    assert ldap._username_of(f"cn=carol,ou=staff,{BASE}", rdns) == "carol"
    assert ldap._username_of(f"uid=carol,ou=people,{BASE}", rdns) is None


@pytest.mark.parametrize("template", ["{username}@example.org", "ou=people,{base}",
                                      "uid={username},cn={username},{base}"])
def test_a_template_that_names_no_user_is_a_configuration_error(settings, template):
    settings.LDAP_USER_DN_TEMPLATE = template
    with pytest.raises(ImproperlyConfigured):
        ldap._user_dn_shape()


def _directory(monkeypatch, users, admins=frozenset(), unresolved=()):
    groups = {"portal-users": ldap.GroupMembers(usernames=frozenset(users), unresolved=tuple(unresolved)),
              "portal-admins": ldap.GroupMembers(usernames=frozenset(admins))}
    monkeypatch.setattr(ldap, "group_members", lambda group: groups[group])


def _users(count):
    return [UserFactory(username=f"user{n}", password="!unusable").username for n in range(count)]


@pytest.mark.django_db
@pytest.mark.parametrize(("active", "gone", "deprovisioned"), [
    (3, 1, True),  # one user leaving is never a mass deprovisioning
    (10, 1, True),
    (20, 2, True),  # 10%
    (20, 3, False),
    (10, 2, False),
    (3, 3, False),
])
def test_the_share_of_users_a_sync_may_deprovision(monkeypatch, active, gone, deprovisioned):
    names = _users(active)
    _directory(monkeypatch, names[gone:])
    assert directory_sync() == (names[:gone] if deprovisioned else [])
    assert User.objects.filter(is_active=True).count() == (active - gone if deprovisioned else active)
    assert AdminNotice.objects.exists() != deprovisioned


@pytest.mark.django_db
def test_a_refused_sync_tells_the_admins_once_a_day(monkeypatch, settings):
    settings.DIRECTORY_SYNC_MAX_DEPROVISION_SHARE = 0.25
    names = _users(4)
    UserFactory(username="ada", password="!unusable", is_staff=True, is_superuser=True)
    _directory(monkeypatch, ["ada"], admins=["nobody"], unresolved=[f"cn=User {n},ou=people,{BASE}"
                                                                    for n in range(4)])
    for _ in range(2):
        assert directory_sync() == []
    assert User.objects.filter(is_active=True).count() == 5
    assert User.objects.get(username="ada").is_staff  # no admin rights change either
    notice = AdminNotice.objects.get()
    assert notice.times == 2 and notice.mailed_at is not None
    assert "4 active portal users no longer in portal-users" in notice.message
    assert ", ".join(names) in notice.message and "4 of its member DNs name no user" in notice.message
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["ada@gpuportal.test"]
    assert "Directory sync refused" in mail.outbox[0].subject


@pytest.mark.django_db
def test_a_local_superuser_is_not_counted(monkeypatch):
    User.objects.create_superuser("root-admin", password="local-pw")
    names = _users(2)
    _directory(monkeypatch, names)
    assert directory_sync() == [] and User.objects.get(username="root-admin").is_active
