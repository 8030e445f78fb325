"""A session under a project (#22) on the real stack: portal → JupyterHub (this tree's spawner) →
Slurm, which lists its job under the project's account; the hub refuses a project Slurm does not
list the user in, without submitting anything."""

import subprocess

import pytest

from portal.projects.models import Project
from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from tests.factories import UserFactory
from tests.hub import wait_for
from tests.slurm_waits import SLURM_PATIENCE, wait_until_gone

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _members(account: str) -> set[str]:
    out = subprocess.run(["sacctmgr", "--noheader", "--parsable2", "list", "assoc", f"account={account}",
                          "format=User"], capture_output=True, text=True, check=True, timeout=30).stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def _jobs_of(user: str) -> list[str]:
    return subprocess.run(["squeue", "-h", "-u", user, "-o", "%i"], capture_output=True, text=True,
                          check=True).stdout.split()


def test_a_session_under_a_project_is_a_job_of_its_account_and_the_hub_checks_it(portal_hub):
    members = _members("nlp")
    if "bob" not in members:
        pytest.skip("the bed's project nlp (bob among its users) is not in Slurm: scripts/up.sh sets it up")
    bob = UserFactory(username="bob", ldap_groups=["portal-users", "vision", "nlp"])
    Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50)
    server_start(user=bob, name="charged", gpus=0, hours=0.25, account="nlp")

    def job_id():
        server = (portal_hub.request("GET", "/users/bob").json().get("servers") or {}).get("charged")
        return server and server["state"].get("job_id")
    job = wait_for(job_id, SLURM_PATIENCE, "the session's job id")
    try:
        account = subprocess.run(["squeue", "-h", "-j", job, "-o", "%a"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        assert account == "nlp"
    finally:
        server_stop(server=Session.objects.get(user=bob, name="charged"))
    wait_until_gone([job], "the stopped session's job")

    # Straight to the hub's API, past the portal: Slurm does not list alice in nlp.
    if "alice" in members:
        return
    portal_hub.request("POST", "/users/alice")
    before = _jobs_of("alice")
    response = portal_hub.request("POST", "/users/alice/servers/stolen",
                                  json={"user_options": {"gpus": 0, "hours": 0.25, "account": "nlp"}})
    assert response.status_code == 400 and "not one of your projects" in response.json()["message"]
    assert set(_jobs_of("alice")) <= set(before)
