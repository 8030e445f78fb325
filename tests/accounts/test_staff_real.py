"""#33: the directory's admin group gets `is_staff` and the named permission set, not superuser
(the real directory: ada is in portal-admins)."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from portal.accounts.models import User
from portal.accounts.services import directory_sync
from portal.accounts.staff import MANAGED, STAFF_GROUP, VIEWED, staff_permissions
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _login(client, username):
    client.post(reverse("accounts:login"), {"username": username, "password": f"{username}-pw"})


def test_every_model_of_the_set_exists():
    """A renamed model would silently drop out of the set."""
    assert len(staff_permissions()) == len(MANAGED) + len(VIEWED) + sum(map(len, MANAGED.values()))


def test_an_admin_is_staff_with_the_set_and_no_superuser(client):
    _login(client, "ada")
    ada = User.objects.get(username="ada")
    assert (ada.is_staff, ada.is_superuser) == (True, False)
    assert list(ada.groups.values_list("name", flat=True)) == [STAFF_GROUP]
    assert ada.has_perm("gpus.change_idlepolicy") and ada.has_perm("jobs.view_job")
    assert not ada.has_perm("accounts.change_user") and not ada.has_perm("auth.change_group")
    assert not ada.has_perm("jobs.change_job") and not ada.has_perm("oauth2_provider.add_application")
    assert client.get(reverse("admin:gpus_idlepolicy_add")).status_code == 200
    assert client.get(reverse("admin:jobs_job_changelist")).status_code == 200
    assert client.get(reverse("admin:auth_group_changelist")).status_code == 403
    user = client.get(reverse("admin:accounts_user_change", args=[ada.pk]))
    assert user.status_code == 200 and b'name="is_superuser"' not in user.content  # read only


def test_the_directory_sync_takes_superuser_away_and_the_group_follows():
    ada = UserFactory(username="ada", password="!unusable", is_staff=True, is_superuser=True)
    alice = UserFactory(username="alice", password="!unusable", is_staff=True)
    root = UserFactory(username="root-local", is_superuser=True, is_staff=True)  # a usable password
    assert directory_sync() == []
    ada.refresh_from_db(), alice.refresh_from_db(), root.refresh_from_db()
    assert (ada.is_staff, ada.is_superuser) == (True, False) and ada.groups.filter(name=STAFF_GROUP).exists()
    assert (alice.is_staff, alice.groups.exists()) == (False, False)
    assert root.is_superuser  # the local emergency account is left alone


def test_a_permission_added_by_hand_is_taken_back_at_the_next_migrate():
    from portal.accounts.staff import staff_group, staff_group_sync

    group = staff_group()
    group.permissions.add(Permission.objects.get(codename="change_user"))
    staff_group_sync()
    assert not group.permissions.filter(codename="change_user").exists()
