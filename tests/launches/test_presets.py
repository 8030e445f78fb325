"""Saved settings (REST and the forms' save button), relaunch and "last used" prefill, without Slurm."""

import re
from datetime import timedelta

import pytest
from django.http import QueryDict

from portal.launches.models import Preset
from portal.launches.selectors import preset_form_url
from portal.launches.services import MAX_PRESETS_PER_USER
from portal.sessions.selectors import server_start_initial as session_initial
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db
SESSION = {"partition": "debug", "gpus": 2, "hours": 1.5, "nodes": 1}


def test_session_preset_create_list_delete(token_client, api_client):
    response = token_client.post("/api/v1/presets/", {"kind": "session", "name": "my 2-GPU debug",
                                                      "values": SESSION}, format="json")
    assert response.status_code == 201, response.json()
    preset = response.json()
    assert preset["values"] == SESSION and preset["template"] == ""
    assert [p["name"] for p in token_client.get("/api/v1/presets/?kind=session").json()] == ["my 2-GPU debug"]
    assert token_client.get("/api/v1/presets/?kind=job").json() == []
    # Saving the name again replaces its values.
    token_client.post("/api/v1/presets/", {"kind": "session", "name": "my 2-GPU debug",
                                           "values": {**SESSION, "gpus": 1}}, format="json")
    assert Preset.objects.get().values["gpus"] == 1
    api_client.force_authenticate(UserFactory(username="bob"))
    assert api_client.get("/api/v1/presets/").json() == []
    assert api_client.delete(f"/api/v1/presets/{preset['id']}/").status_code == 404
    assert token_client.delete(f"/api/v1/presets/{preset['id']}/").status_code == 204
    assert not Preset.objects.exists()


@pytest.mark.parametrize(("body", "field"), [
    ({"kind": "session", "name": "x", "values": {"gpus": -1}}, "values.gpus"),
    ({"kind": "session", "name": "x", "values": {"gpus": 1.5}}, "values.gpus"),
    ({"kind": "session", "name": "x", "values": {"gpus": True}}, "values.gpus"),
    ({"kind": "session", "name": "x", "values": {"hours": "nan"}}, "values.hours"),
    ({"kind": "session", "name": "x", "values": {"hours": 10**9}}, "values.hours"),
    ({"kind": "session", "name": "x", "values": {"partition": "gpu; rm -rf /"}}, "values.partition"),
    ({"kind": "session", "name": "x", "values": {"cmd": "/bin/sh"}}, "values.cmd"),
    ({"kind": "session", "name": "x", "values": []}, "values"),
    ({"kind": "session", "name": "", "values": {}}, "name"),
    ({"kind": "session", "name": "a\nb", "values": {}}, "name"),
    ({"kind": "session", "name": "x" * 65, "values": {}}, "name"),
    ({"kind": "other", "name": "x", "values": {}}, "kind"),
    ({"kind": "job", "name": "x", "template": "nope", "values": {}}, "template"),
    ({"kind": "job", "name": "x", "template": "custom", "values": {"time_limit": "soon"}},
     "values.time_limit"),
    ({"kind": "job", "name": "x", "template": "custom", "values": {"nope": 1}}, "values.nope"),
    # Exactly the schema's JSON types: no text for a number, no true for a number.
    ({"kind": "job", "name": "x", "template": "custom", "values": {"time_limit": "90"}},
     "values.time_limit"),
    ({"kind": "job", "name": "x", "template": "custom", "values": {"gpus": True}}, "values.gpus"),
    ({"kind": "session", "name": "x", "values": {"gpus": "2"}}, "values.gpus"),
    ({"kind": "session", "name": "x", "values": {"hours": True}}, "values.hours"),
    ({"kind": "session", "name": "x", "values": {"hours": "1.5"}}, "values.hours"),
    ({"kind": "session", "name": "x", "values": {"partition": ["gpu"]}}, "values.partition"),
    ({"kind": "session", "name": "x", "values": {}, "extra": 1}, "extra"),
])
def test_bad_presets_are_400s_naming_the_field(token_client, body, field):
    response = token_client.post("/api/v1/presets/", body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()["fields"], response.json()
    assert not Preset.objects.exists()


def test_job_preset_keeps_checked_parameters(token_client):
    response = token_client.post("/api/v1/presets/", {
        "kind": "job", "name": "long", "template": "custom",
        "values": {"time_limit": 90, "gpus": 2, "commands": "echo hi"}}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["values"] == {"time_limit": 90, "gpus": 2, "commands": "echo hi"}


def test_presets_per_user_are_bounded(token_client, user):
    Preset.objects.bulk_create([Preset(user=user, kind="session", name=f"p{n}", values={})
                                for n in range(MAX_PRESETS_PER_USER)])
    response = token_client.post("/api/v1/presets/", {"kind": "session", "name": "one more", "values": {}},
                                 format="json")
    assert response.status_code == 400 and "name" in response.json()["fields"]


def test_session_prefill_relaunch_preset_and_last_used(user):
    assert session_initial(user=user, query=QueryDict()) == {}
    SessionFactory(user=user, name="old", partition="gpu", gpus=1, hours=2.0)
    last = SessionFactory(user=user, name="nb", partition="debug", gpus=2, hours=1.5, environment="pt")
    assert session_initial(user=user, query=QueryDict()) == {
        "partition": "debug", "gpus": 2, "hours": 1.5, "nodes": 1, "environment": "pt", "account": ""}
    # Relaunch of a session still running: one hour more, and a name that is free.
    relaunch = session_initial(user=user, query=QueryDict("relaunch=nb&more_hours=1"))
    assert relaunch["hours"] == 2.5 and relaunch["name"] == "nb-2" and relaunch["gpus"] == 2
    last.ended_at = last.created_at + timedelta(hours=1)
    last.save()
    assert session_initial(user=user, query=QueryDict("relaunch=nb"))["name"] == "nb"
    # A preset's link carries the form's own fields.
    preset = Preset.objects.create(user=user, kind="session", name="big", values={"gpus": 4, "hours": 8})
    link = preset_form_url(preset=preset)
    assert link == "/servers/?gpus=4&hours=8"
    assert session_initial(user=user, query=QueryDict(link.split("?")[1])) == {"gpus": "4", "hours": "8"}
    # Somebody else's session: the user's own last session instead.
    bob = UserFactory(username="bob")
    assert session_initial(user=bob, query=QueryDict("relaunch=nb")) == {}


@pytest.fixture
def browser_client(client, user):
    client.force_login(user)
    return client


def test_composer_prefills_from_last_job_preset_and_extended_clone(browser_client, user, partitions):
    assert "echo hi</textarea>" not in browser_client.get("/jobs/new/custom/").content.decode()
    job = JobFactory(user=user, parameters={"commands": "echo last", "gpus": 1, "nodes": 1, "time_limit": 30},
                     time_limit=timedelta(minutes=90), name="extended")
    page = browser_client.get("/jobs/new/custom/").content.decode()
    assert "echo last</textarea>" in page
    # A clone runs as long as the job ended up with (its extended limit).
    clone = browser_client.get(f"/jobs/new/custom/?clone={job.pk}").content.decode()
    assert re.search(r'id="id_time_limit" name="time_limit" value="90"', clone)
    assert 'value="extended"' in clone
    preset = Preset.objects.create(user=user, kind="job", template="custom", name="debug run",
                                   values={"commands": "echo preset", "gpus": 0})
    page = browser_client.get(preset_form_url(preset=preset)).content.decode()
    assert "echo preset</textarea>" in page and "debug run" in page


def test_composer_save_button_stores_the_form(browser_client, partitions):
    response = browser_client.post("/launches/presets/job/custom/", {
        "preset_name": "my 2-GPU debug", "partition": "debug", "time_limit": "30", "commands": "nvidia-smi",
        "gpus": "2", "nodes": "1", "modules": "", "environment": ""})
    preset = Preset.objects.get()
    assert response.status_code == 302 and response["Location"] == preset_form_url(preset=preset)
    assert preset.values["gpus"] == 2 and preset.values["time_limit"] == 30
    # A refused value: nothing saved, the reason shown.
    response = browser_client.post("/launches/presets/job/custom/", {"preset_name": "bad", "gpus": "x"},
                                   follow=True)
    assert "not saved" in response.content.decode() and Preset.objects.count() == 1


def test_session_save_button_and_delete(browser_client, user):
    response = browser_client.post("/launches/presets/session/", {
        "preset_name": "two", "name": "ignored", "partition": "gpu", "gpus": "2", "hours": "1", "nodes": "1",
        "environment": ""})
    preset = Preset.objects.get()
    assert response["Location"] == "/servers/?gpus=2&hours=1.0&nodes=1&partition=gpu"
    assert preset.values == {"partition": "gpu", "gpus": 2, "hours": 1.0, "nodes": 1}
    browser_client.force_login(UserFactory(username="bob"))
    assert browser_client.post(f"/launches/presets/{preset.pk}/delete/").status_code == 404
    browser_client.force_login(user)
    assert browser_client.post(f"/launches/presets/{preset.pk}/delete/").status_code == 302
    assert not Preset.objects.exists()
