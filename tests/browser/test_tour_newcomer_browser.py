""""Getting started" as a newcomer reads it: alice, with no session and no job in the portal, follows
the tour's steps in order in headless Chromium on the real stack (hub, Slurm) and finds the words
each step promises, quoted from docs/getting-started.md itself. Then, with a history, each form
says it is filled in from her last session or submission, and its link brings the defaults back.
No screenshots of the tour's (tests/docs/test_tour_browser.py takes those)."""

import re
from datetime import datetime

import pytest
from django.utils import timezone

from portal.accounts.models import User
from portal.jobs.job_templates import catalog
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from tests.browser.nav import go
from tests.conftest import ROOT
from tests.hub import wait_for
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE, wait_until_gone

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
# The guide as one line of words: its Markdown wraps where the page does not.
GUIDE = " ".join((ROOT / "docs" / "getting-started.md").read_text().split())
NARROW = 390  # a phone's width: no page may need sideways scrolling


def _promised(*quotes: str) -> None:
    """The guide says these words (so a page that shows them shows what the guide promised)."""
    for quote in quotes:
        assert quote in GUIDE, f"docs/getting-started.md no longer says {quote!r}"


def _words(locator) -> str:
    return " ".join(locator.inner_text().split())


def _fits(page) -> None:
    """The page's own content needs no sideways scrolling on a phone (the shared header aside)."""
    width = page.viewport_size["width"]
    page.set_viewport_size({"width": NARROW, "height": 800})
    try:
        wide = page.evaluate("""(narrow) => [...document.querySelectorAll('main *')]
            .filter(e => e.getBoundingClientRect().right > narrow + 1)
            .map(e => `${e.tagName}#${e.id} ${Math.round(e.getBoundingClientRect().right)} px`)""", NARROW)
        assert not wide, f"{page.url} at {NARROW} px: {wide[:10]}"
    finally:
        page.set_viewport_size({"width": width, "height": 800})


def _local(moment: datetime) -> str:
    return f"{timezone.localtime(moment):%-d %b %Y, %H:%M}"


def test_a_newcomer_follows_the_tour_and_sees_what_each_step_promises(portal_hub, live_server, slurm, page):
    base = live_server.url
    page.set_viewport_size({"width": 1280, "height": 800})

    # 1. Log in; the first page is home, and the cluster's status is in the Cluster menu.
    page.goto(f"{base}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    alice = User.objects.get(username="alice")
    assert not Job.objects.filter(user=alice).exists()
    assert not Session.objects.filter(user=alice).exists()
    _promised("The first page is your **home page**", "*What needs you*",
              "**Cluster** → **Cluster status**", "A100 GPUs free", "the **Nodes** table")
    assert _words(page.locator("h1")).startswith("Welcome")
    assert page.locator("h2", has_text="What needs you").count() == 1
    go(page, "cluster-link")
    assert _words(page.locator("h1")) == "Cluster status"
    gpu_card = page.locator(".card.partition", has_text="gpu").first
    assert re.search(r"\d+ of \d+ A100 GPUs free", _words(gpu_card)), _words(gpu_card)
    assert re.search(r"\d+ running · \d+ pending jobs", _words(gpu_card)), _words(gpu_card)
    assert page.locator("h2", has_text="Nodes").count() == 1

    # 2. Sessions -> the start form with its defaults, no notice; Start -> ready, node, time left.
    go(page, "sessions-link")
    _promised("*Start a session*", "*GPUs per node*", "*Session time (hours)*", "*Nodes*",
              "*Software environment*", "(`my-server`, 1 GPU, 1 node)", "**Start session**",
              "**Open JupyterLab**")
    assert page.locator("h2", has_text="Start a session").count() == 1
    for label in ("GPUs per node", "Session time (hours)", "Nodes", "Software environment"):
        assert page.get_by_label(label, exact=True).count() == 1, label
    assert (page.input_value("#id_name"), page.input_value("#id_gpus"), page.input_value("#id_nodes"),
            page.input_value("#id_hours")) == ("my-server", "1", "1", "")
    assert page.locator("#prefill-notice").count() == 0 and page.locator("#start-hub-down").count() == 0
    assert _words(page.locator("#start")) == "Start session"
    _fits(page)
    page.fill("#id_name", "tour")
    page.select_option("#id_partition", "gpu")
    page.fill("#id_hours", "1")
    page.click("#start")
    card = page.locator('[data-server="tour"]')
    page.locator("#open-tour").wait_for(timeout=2 * SLURM_PATIENCE * 1000)
    assert card.get_attribute("data-state") == "ready"
    assert card.locator("[data-node]").inner_text() and card.locator("[data-time-left]").count() == 1
    assert _words(page.locator("#open-tour")) == "Open JupyterLab"
    job_id = portal_hub.request("GET", "/users/alice").json()["servers"]["tour"]["state"]["job_id"]

    # 3. Open JupyterLab: through the portal, with ~/templates/ in the file browser.
    _promised("`~/templates/` holds the notebook templates")
    with page.context.expect_page() as opened:
        page.click("#open-tour")
    lab = opened.value
    lab.set_default_timeout(60000)
    lab.locator("#jp-main-dock-panel").wait_for()
    assert "/user/alice/tour/lab" in lab.url
    lab.goto(lab.url.split("/lab")[0] + "/lab?reset")  # the default workspace: the file browser open
    lab.locator(".jp-DirListing-item", has_text="templates").first.wait_for()
    lab.close()
    page.reload()
    page.click("#stop-tour")
    wait_until_gone([job_id], "the tour session's job")

    # 4. Jobs -> New job -> Custom script: the template's defaults, as the guide quotes them.
    custom = {p.name: p.default for p in catalog().templates["custom"].parameters}
    _promised("**Compute** → **Batch jobs** → **New job** → *Custom script*", "*Time limit (minutes)*",
              "*GPUs per node*", "*Commands*",
              "a time limit of 480 minutes (8 h), 1 GPU on 1 node, no environment",
              "```bash " + " ".join(custom["commands"].split()) + " ```",
              "**Preview script** shows the exact script, **Submit this script** sends it")
    go(page, "jobs-link")
    page.click("#new-job")
    page.click('[data-template="custom"] a')
    assert page.locator("#prefill-notice").count() == 0
    for label in ("Time limit (minutes)", "GPUs per node", "Nodes", "Commands"):
        assert page.get_by_label(label, exact=True).count() == 1, label
    assert page.input_value("#id_commands") == custom["commands"]
    fields = ("time_limit", "gpus", "nodes", "partition", "environment")
    shown = [page.input_value(f"#id_{name}") for name in fields]
    assert shown == ["480", "1", "1", "gpu", ""]
    _fits(page)
    # The tour's choices: debug, 10 minutes, no GPU (its own commands write TensorBoard events; these
    # are the newcomer's defaults).
    page.fill("#id_name", "tour job")
    page.select_option("#id_partition", "debug")
    page.fill("#id_time_limit", "10")
    page.fill("#id_gpus", "0")
    page.click("#preview-button")
    script = page.locator("#script-preview").inner_text()
    assert "#SBATCH --partition=debug" in script and "echo hello from $(hostname)" in script
    assert _words(page.locator("#submit-button")) == "Submit this script"
    page.click("#submit-button")
    page.wait_for_selector("#stdout")
    job = Job.objects.get(user=alice, name="tour job")
    _promised("The job's page follows it from `PENDING` to `COMPLETED` and tails its output live.")
    wait_for(lambda: slurm_poll(slurm=slurm) and Job.objects.get(pk=job.pk).is_terminal, SLURM_PATIENCE,
             "the tour's job to end", interval=1)
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED, (job.state, job.reason)
    page.wait_for_function("() => document.getElementById('stdout').textContent.includes('hello from')",
                           timeout=30000)
    page.locator('#job-state .badge[data-state="COMPLETED"]').wait_for(timeout=30000)  # no reload

    # With a history: each form says where its values come from, and gives the defaults back.
    _promised('("Filled in from your last submission of this template on" *date*), with **Use the '
              "template's defaults**", '("Filled in from your last session"), with **Use the defaults**')
    page.goto(f"{base}/jobs/new/custom/")
    assert _words(page.locator("#prefill-notice")) == (
        f"Filled in from your last submission of this template on {_local(job.submitted_at)}. "
        "Use the template's defaults")
    assert (page.input_value("#id_time_limit"), page.input_value("#id_gpus")) == ("10", "0")
    _fits(page)
    page.click("#template-defaults")
    assert page.locator("#prefill-notice").count() == 0
    assert (page.input_value("#id_time_limit"), page.input_value("#id_gpus")) == ("480", "1")

    go(page, "sessions-link")
    session = Session.objects.get(user=alice, name="tour")
    assert _words(page.locator("#prefill-notice")) == (
        f"Filled in from your last session (tour, started on {_local(session.created_at)}). Use the defaults")
    assert page.input_value("#id_hours") == "1.0"
    _fits(page)
    page.click("#form-defaults")
    assert page.locator("#prefill-notice").count() == 0 and page.input_value("#id_hours") == ""
