"""A notebook session charged to a project (#22): the form and the API offer the user's projects as the
composer does, the portal refuses another group's project naming `account`, the hub gets it and the
spawner checks it again and writes #SBATCH --account. Which project starts a job sooner, from the
database only."""

import pytest
from django.utils import timezone
from tornado import web

from portal.projects.models import Project
from portal.sessions.hub import JupyterHub
from portal.sessions.models import Session
from portal.waits.models import FairShareRow, Waiting
from slurm.adapter import Slurm
from spawners.options import OptionError
from spawners.slurm_spawner import PortalSlurmSpawner, apply_portal_options
from tests.sessions.test_api import FakeHub
from tests.spawners.test_options import make_spawner, rebuild
from tests.spawners.test_poller import run

pytestmark = pytest.mark.django_db


@pytest.fixture
def hub(monkeypatch) -> FakeHub:
    fake = FakeHub()
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: fake))
    return fake


@pytest.fixture
def projects(user, partitions):
    user.ldap_groups = ["portal-users", "vision", "nlp"]
    user.save()
    vision = Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision",
                                    budget_gpu_hours=500, slurm_limit_gpu_minutes=30000,
                                    used_gpu_minutes=6000)
    nlp = Project.objects.create(name="nlp", ldap_group="nlp", slurm_account="nlp", budget_gpu_hours=50,
                                 slurm_limit_gpu_minutes=3000, used_gpu_minutes=1200)
    Project.objects.create(name="audio", ldap_group="audio", slurm_account="audio", budget_gpu_hours=10)
    return vision, nlp


def test_the_session_form_offers_her_projects_as_the_composer_does(client, user, projects, hub):
    client.force_login(user)
    page = client.get("/servers/").content.decode()
    composer = client.get("/jobs/new/custom/").content.decode()
    for label in ("vision — 400 of 500 GPU-h left", "nlp — 30 of 50 GPU-h left"):
        assert label in page and label in composer
    assert '<option value="audio"' not in page
    refused = client.post("/servers/", {"name": "nb", "gpus": "1", "account": "audio"})
    assert refused.status_code == 400
    assert "is not one of your projects" in refused.content.decode()
    assert refused.context["form"].errors["account"]
    assert client.post("/servers/", {"name": "nb", "gpus": "1", "account": "nlp"}).status_code == 302
    server = Session.objects.get(name="nb")
    assert server.account == "nlp" and hub.started[-1]["account"] == "nlp"
    assert "project <span data-account>nlp</span>" in client.get("/servers/").content.decode()
    # Relaunched, it keeps its project.
    assert 'value="nlp" selected' in client.get("/servers/", {"relaunch": "nb"}).content.decode()


def test_the_api_takes_account_refuses_another_groups_and_none_sends_none(token_client, projects, hub):
    refused = token_client.post("/api/v1/sessions/", {"name": "nb", "account": "audio"}, format="json")
    assert refused.status_code == 400 and list(refused.json()["fields"]) == ["account"]
    assert not Session.objects.exists()
    started = token_client.post("/api/v1/sessions/", {"name": "nb", "account": "vision"}, format="json")
    assert started.status_code == 202 and started.json()["account"] == "vision"
    assert token_client.post("/api/v1/sessions/", {"name": "plain"}, format="json").status_code == 202
    assert hub.started[0]["account"] == "vision" and "account" not in hub.started[1]


def test_the_spawner_keeps_the_account_and_writes_it_into_the_batch_script():
    assert rebuild({"account": "vision"}).as_user_options()["account"] == "vision"
    assert "account" not in rebuild({}).as_user_options()
    for bad in ("Vision", "a;b", 5, "x" * 40):
        with pytest.raises(OptionError):
            rebuild({"account": bad})
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 1, "account": "vision"})
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"
    subvars = spawner.get_req_subvars()
    subvars["cmd"] = spawner.cmd_formatted_for_batch()
    subvars.update(spawner.user_options)
    assert "#SBATCH --account=vision\n" in run(spawner._get_batch_script(**subvars))
    apply_portal_options(spawner, {"gpus": 1})
    subvars = {**spawner.get_req_subvars(), "cmd": "x", **spawner.user_options}
    assert "--account" not in run(spawner._get_batch_script(**subvars))


def test_the_spawner_refuses_an_account_slurm_does_not_list_the_user_in(monkeypatch):
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 1, "account": "nlp"})
    members = {"nlp": {"bob"}}
    monkeypatch.setattr(Slurm, "account_members", lambda self, accounts: members)
    submitted = []

    async def submit(self):
        submitted.append(True)
        return "1"

    monkeypatch.setattr(PortalSlurmSpawner.__mro__[1], "submit_batch_script", submit)
    with pytest.raises(web.HTTPError) as error:
        run(spawner.submit_batch_script())
    assert error.value.status_code == 400 and "not one of your projects" in error.value.log_message
    assert not submitted
    members["nlp"].add(spawner.user.name)
    assert run(spawner.submit_batch_script()) == "1"


def _waiting(job_id: str, account: str, partition: str = "gpu") -> Waiting:
    return Waiting.objects.create(job_id=job_id, user="carol", account=account, partition=partition,
                                  reason="Priority", updated_at=timezone.now())


def test_which_project_gets_a_gpu_sooner_from_the_stored_cycle(client, token_client, user, projects):
    now = timezone.now()
    FairShareRow.objects.create(account="vision", user="alice", fairshare=0.4, updated_at=now)
    FairShareRow.objects.create(account="nlp", user="alice", fairshare=0.9, updated_at=now)
    FairShareRow.objects.create(account="nlp", user="bob", fairshare=0.1, updated_at=now)
    _waiting("11", "vision")
    _waiting("12", "vision")
    _waiting("13", "nlp", partition="debug")
    listed = {p["name"]: p for p in token_client.get("/api/v1/projects/").json()}
    shown = {n: (p["fairshare"], p["pending_jobs"], p["partition"], p["sooner"]) for n, p in listed.items()}
    assert shown == {"vision": (0.4, 2, "gpu", False), "nlp": (0.9, 0, "gpu", True)}
    assert listed["nlp"]["sooner_reason"] == ("your fair share in nlp is 0.90 against 0.40 in vision: "
                                              "its jobs rank higher.")
    assert listed["vision"]["left_gpu_hours"] == 400  # the budget fields stay
    debug = {p["name"]: p["pending_jobs"] for p in token_client.get(
        "/api/v1/projects/", {"partition": "debug"}).json()}
    assert debug == {"vision": 0, "nlp": 1}
    bad = token_client.get("/api/v1/projects/", {"partition": "nope"})
    assert bad.status_code == 400 and list(bad.json()["fields"]) == ["partition"]

    client.force_login(user)
    for url in ("/servers/", "/jobs/new/custom/"):
        page = client.get(url).content.decode()
        assert 'data-account="nlp" data-sooner="1"' in page and "its jobs rank higher" in page

    # A used-up budget holds jobs, whatever the fair share.
    Project.objects.filter(name="nlp").update(used_gpu_minutes=3000)
    listed = {p["name"]: p for p in token_client.get("/api/v1/projects/").json()}
    assert listed["vision"]["sooner"] and not listed["nlp"]["sooner"]
    assert listed["vision"]["sooner_reason"] == "nlp has used its budget: Slurm holds its jobs."


def test_equal_projects_mark_none_and_fewer_waiting_breaks_a_tie(token_client, projects):
    listed = token_client.get("/api/v1/projects/").json()
    assert not any(p["sooner"] for p in listed) and {p["fairshare"] for p in listed} == {None}
    _waiting("21", "nlp")
    listed = {p["name"]: p for p in token_client.get("/api/v1/projects/").json()}
    assert listed["vision"]["sooner"]
    assert listed["vision"]["sooner_reason"] == "0 of its jobs wait in gpu against 1 for nlp."
