"""Deprovisioning that finishes the job, against the real slapd and Slurm: bob leaves portal-users
with work of every kind, and after the directory sync and one poll cycle all of it has ended in the
portal, with the reason, and in Slurm. A directory change that would deprovision everybody
deprovisions nobody and tells the admins; members listed by cn= DNs are read."""

import subprocess
import time
import uuid

import pytest
from django.core import mail
from django.utils import timezone

from portal.accounts import ldap
from portal.accounts.models import User
from portal.accounts.services import directory_sync
from portal.containers.models import Image, Pull
from portal.jobs.models import Job, JobState
from portal.jobs.services.prepare import job_prepare
from portal.jobs.services.submission import job_create
from portal.notifications.models import AdminNotice
from portal.sessions.models import Session
from portal.webapps.models import App, AppState
from tests.accounts.conftest import LDAP, SUFFIX, token_of
from tests.factories import AppFactory, UserFactory
from tests.jobs.conftest import polled  # noqa: F401 (a fixture bobs_work asks for)
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE, still_live, wait_until_gone

pytestmark = [pytest.mark.django_db, pytest.mark.integration]
REASON = "Deprovisioned: no longer in portal-users."


@pytest.fixture(autouse=True)
def _no_hub(settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # deprovisioning tells a (closed) hub
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


def _sbatch(slurm, *, user: str, comment: str, name: str = "deprov-test") -> str:
    """A real Slurm job of `user` that runs (or waits) until cancelled."""
    script = (f"#!/bin/bash\n#SBATCH --job-name={name}\n#SBATCH --time=10\n#SBATCH --chdir=/home/{user}\n"
              "#SBATCH --output=/dev/null\n#SBATCH --cpus-per-task=1 --mem=100M\nsleep 600\n")
    return slurm.submit(script=script, user=user, comment=comment)


@pytest.fixture
def bobs_work(slurm, api_client, request):
    """bob with a token, a batch job in Slurm and one waiting in the portal, a notebook session's,
    a web app's and a pull's Slurm jobs, and a portal job Slurm runs that no record tracks.
    Whatever is left is cancelled afterwards."""
    request.getfixturevalue("polled")  # the portal knows the partitions
    key = token_of(api_client, "bob")
    bob = User.objects.get(username="bob")
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = api_client.post("/api/v1/jobs/", {"template": "custom", "name": "deprov batch", "parameters": {
        "commands": "sleep 600", "gpus": 0, "time_limit": 10}}, format="json")
    api_client.credentials()
    assert response.status_code == 201, response.content
    in_slurm = Job.objects.get(pk=response.json()["id"])
    assert in_slurm.state == JobState.PENDING and in_slurm.slurm_job_id, in_slurm.reason
    draft = job_prepare(user=bob, template="custom", name="deprov waiting",
                        parameters={"commands": "true", "gpus": 0, "time_limit": 5})
    waiting = job_create(user=bob, draft=draft)  # due now: the next cycle would submit it
    server = Session.objects.create(
        user=bob, name="deprov", partition="gpu", gpus=0, hours=1, hub_accepted_at=timezone.now(),
        job_id=_sbatch(slurm, user="bob", comment="", name="jupyterhub:deprov"))
    board = AppFactory(user=bob, state=AppState.QUEUED, submitted_at=timezone.now())
    board.slurm_job_id = _sbatch(slurm, user="bob", comment=board.slurm_comment)
    board.save(update_fields=["slurm_job_id"])
    image = Image.objects.create(name="deprov", runtime="podman", reference="127.0.0.1:5000/deprov/x:1")
    pull = Pull.objects.create(user=bob, image=image)
    pull.slurm_job_id = _sbatch(slurm, user="bob", comment=f"gpuportal-pull:{pull.uuid}")
    pull.save(update_fields=["slurm_job_id"])
    stray = _sbatch(slurm, user="bob", comment=f"gpuportal:{uuid.uuid4()}")
    work = {"key": key, "in_slurm": in_slurm, "waiting": waiting, "server": server, "board": board,
            "pull": pull, "stray": stray}
    try:
        yield work
    finally:
        for job_id in still_live([in_slurm.slurm_job_id, server.job_id, board.slurm_job_id,
                                  pull.slurm_job_id, stray]):
            subprocess.run(["scancel", job_id], check=False)


def test_a_user_who_left_has_all_their_work_ended_within_one_cycle(
        bobs_work, bob_leaves, slurm, api_client, django_capture_on_commit_callbacks):
    work = bobs_work
    tracked = [work["in_slurm"].slurm_job_id, work["server"].job_id, work["board"].slurm_job_id,
               work["pull"].slurm_job_id]
    assert set(still_live([*tracked, work["stray"]])) == {*tracked, work["stray"]}
    bob_leaves()
    try:
        with django_capture_on_commit_callbacks(execute=True):  # the worker's task (eager here)
            assert directory_sync() == ["bob"]
    finally:
        bob_leaves.restore()  # the shared directory gets bob back at once: the rest needs no LDAP
    wait_until_gone(tracked, "bob's jobs, which the worker cancels")
    slurm_poll(slurm=slurm)  # one cycle: the stray goes, and the records settle
    wait_until_gone([work["stray"]], "bob's untracked portal job, which the poll cycle cancels")
    in_slurm = Job.objects.get(pk=work["in_slurm"].pk)
    deadline = time.monotonic() + SLURM_PATIENCE
    # Accounting may lag a cancel (the job may have started meanwhile); the next cycles ask again.
    while in_slurm.state in (JobState.PENDING, JobState.RUNNING) and time.monotonic() < deadline:
        time.sleep(1)
        slurm_poll(slurm=slurm)
        in_slurm.refresh_from_db()

    waiting = Job.objects.get(pk=work["waiting"].pk)
    assert (in_slurm.state, in_slurm.reason) == (JobState.CANCELLED, REASON)
    assert (waiting.state, waiting.reason, waiting.slurm_job_id) == (JobState.CANCELLED, REASON, "")
    server = Session.objects.get(pk=work["server"].pk)
    assert server.ended_at and server.end_detail == REASON
    board = App.objects.get(pk=work["board"].pk)
    assert (board.state, board.reason) == (AppState.ENDED, REASON)
    pull = Pull.objects.get(pk=work["pull"].pk)
    assert (pull.state, pull.error) == (Pull.State.FAILED, REASON)
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {work['key']}")
    assert api_client.get("/api/v1/me/").status_code == 401


# --- a directory of our own, under the shared one: a test OU that nobody else reads ---


def _ldap(command: str, ldif: str = "", *args: str) -> None:
    subprocess.run([command, *LDAP, *args], input=ldif, text=True, check=True, capture_output=True)


@pytest.fixture
def test_ou(settings):
    """ou=deprov-<pid>: people named as the test says, groups `users` and `admins`; the portal's
    settings point at it. Removed afterwards."""
    ou = f"ou=deprov-{uuid.uuid4().hex[:8]},{SUFFIX}"
    _ldap("ldapadd", f"dn: {ou}\nobjectClass: organizationalUnit\nou: {ou.split(',')[0][3:]}\n")
    settings.LDAP_GROUP_BASE = ou
    settings.LDAP_USER_GROUP, settings.LDAP_ADMIN_GROUP = "users", "admins"
    settings.LDAP_USER_DN_TEMPLATE = f"uid={{username}},{ou}"

    def person(uid: str, cn: str = "") -> str:
        """An entry named by its uid, or by `cn` when given (its only cn)."""
        dn = f"cn={cn},{ou}" if cn else f"uid={uid},{ou}"
        _ldap("ldapadd", f"dn: {dn}\nobjectClass: inetOrgPerson\nuid: {uid}\ncn: {cn or uid}\nsn: Test\n")
        return dn

    def group(name: str, members: list[str]) -> None:
        lines = "".join(f"member: {member}\n" for member in members)
        _ldap("ldapadd", f"dn: cn={name},{ou}\nobjectClass: groupOfNames\ncn: {name}\n{lines}")

    def members(name: str, dns: list[str]) -> None:
        lines = "".join(f"member: {dn}\n" for dn in dns)
        _ldap("ldapmodify", f"dn: cn={name},{ou}\nchangetype: modify\nreplace: member\n{lines}")

    try:
        yield type("TestOu", (), {"dn": ou, "person": person, "group": group, "members": members})
    finally:
        subprocess.run(["ldapdelete", *LDAP, "-r", ou], check=False, capture_output=True)


def test_a_group_rewritten_to_dns_that_name_nobody_deprovisions_nobody_and_tells_the_admins(test_ou):
    dns = [test_ou.person(f"tuser{n}") for n in range(3)]
    test_ou.group("users", dns)
    test_ou.group("admins", dns[:1])
    for n in range(3):
        UserFactory(username=f"tuser{n}", password="!unusable", is_staff=n == 0, is_superuser=n == 0)
    assert directory_sync() == []
    assert not AdminNotice.objects.exists()

    # Members as cn= DNs of no entry: read by uid=, this group names nobody at all.
    test_ou.members("users", [f"cn=Test User {n},{test_ou.dn}" for n in range(3)])
    assert directory_sync() == []
    assert User.objects.filter(username__startswith="tuser", is_active=True).count() == 3
    notice = AdminNotice.objects.get()
    assert "3 active portal users no longer in users" in notice.message
    assert "3 of its member DNs name no user" in notice.message
    assert [message.to for message in mail.outbox] == [["tuser0@gpuportal.test"]]


def test_members_listed_by_cn_dns_are_read(test_ou, settings):
    # Entries named by cn, with a uid: the template's uid= form does not match, the entry's uid does.
    carol = test_ou.person("tcarol", cn="Carol Test")
    dave = test_ou.person("tdave")
    gone = f"cn=Gone Person,{test_ou.dn}"  # a deleted user's DN left in the group
    test_ou.group("users", [carol, dave, gone])
    assert ldap.group_members("users") == ldap.GroupMembers(usernames=frozenset({"tcarol", "tdave"}),
                                                            unresolved=(gone,))
    # A directory whose users are named by cn: the login template says so, and members match it.
    settings.LDAP_USER_DN_TEMPLATE = f"cn={{username}},{test_ou.dn}"
    erin = test_ou.person("terin", cn="terin")
    test_ou.members("users", [erin, carol])
    # carol's cn is no POSIX login name: she cannot log in by this template, so she is nobody here.
    assert ldap.group_members("users") == ldap.GroupMembers(usernames=frozenset({"terin"}),
                                                            unresolved=(carol,))
