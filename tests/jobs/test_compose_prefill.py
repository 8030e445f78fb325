"""The composer says when it is filled in from the user's last job of the template, and links to the
template's own defaults; a user with no history gets the defaults and no notice."""

import re
from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from portal.jobs.job_templates import catalog
from portal.jobs.models import Job
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db
NOTICE = "Filled in from your last submission of this template on"


def _field(page: str, name: str) -> str:
    textarea = re.search(rf'<textarea id="id_{name}" name="{name}"[^>]*>(.*?)</textarea>', page, re.DOTALL)
    if textarea:
        return textarea[1]
    return re.search(rf'id="id_{name}" name="{name}" value="([^"]*)"', page)[1]


def _defaults() -> dict[str, object]:
    return {p.name: p.default for p in catalog().templates["custom"].parameters}


def test_a_user_with_no_history_gets_the_templates_defaults_and_no_notice(client, partitions):
    client.force_login(UserFactory(username="newcomer"))
    page = client.get("/jobs/new/custom/").content.decode()
    assert NOTICE not in page and 'id="template-defaults"' not in page
    defaults = _defaults()
    assert _field(page, "commands") == defaults["commands"]
    assert defaults["commands"] == "nvidia-smi || true\necho hello from $(hostname)"  # as the guide quotes
    assert _field(page, "time_limit") == "480" == str(defaults["time_limit"])  # 8 h, as the guide says
    assert (_field(page, "gpus"), _field(page, "nodes")) == ("1", "1")


def test_the_last_submission_is_named_and_the_defaults_are_one_link_away(client, partitions):
    user = UserFactory(username="returning")
    client.force_login(user)
    job = JobFactory(user=user, template="custom", name="custom",
                     parameters={"commands": "burn cpu", "gpus": 2, "nodes": 1, "time_limit": 60})
    submitted = timezone.make_aware(datetime(2026, 11, 27, 14, 5))
    Job.objects.filter(pk=job.pk).update(submitted_at=submitted)
    # Another template's job is not this template's last submission.
    other = JobFactory(user=user, template="pytorch-train")
    Job.objects.filter(pk=other.pk).update(submitted_at=submitted + timedelta(hours=1))

    page = client.get("/jobs/new/custom/").content.decode()
    shown = (_field(page, "commands"), _field(page, "time_limit"), _field(page, "gpus"))
    assert shown == ("burn cpu", "60", "2")
    notice = re.search(r'<p class="notice" id="prefill-notice">(.*?)</p>', page, re.DOTALL)[1]
    text = " ".join(re.sub(r"<[^>]+>", "", notice).split())
    local = timezone.localtime(submitted)
    assert text == f"{NOTICE} {local:%-d %b %Y, %H:%M}. Use the template's defaults", text
    assert 'href="/jobs/new/custom/?defaults=1" id="template-defaults"' in notice

    defaults = client.get("/jobs/new/custom/?defaults=1").content.decode()
    assert NOTICE not in defaults
    assert _field(defaults, "commands") == _defaults()["commands"]
    assert _field(defaults, "time_limit") == "480" and _field(defaults, "gpus") == "1"


def test_a_clone_or_a_presets_link_is_not_called_the_last_submission(client, partitions):
    user = UserFactory(username="returning")
    client.force_login(user)
    job = JobFactory(user=user, template="custom", parameters={"commands": "echo again", "gpus": 0})
    clone = client.get(f"/jobs/new/custom/?clone={job.pk}").content.decode()
    assert "echo again</textarea>" in clone and NOTICE not in clone
    linked = client.get("/jobs/new/custom/?commands=echo+preset").content.decode()
    assert "echo preset</textarea>" in linked and NOTICE not in linked
    # A form sent back (a preview) holds what the user sent, not the last submission.
    posted = client.post("/jobs/new/custom/", {"commands": "echo mine", "gpus": "0", "nodes": "1",
                                               "partition": "debug", "time_limit": "5", "action": "preview"})
    assert "echo mine</textarea>" in posted.content.decode() and NOTICE not in posted.content.decode()
