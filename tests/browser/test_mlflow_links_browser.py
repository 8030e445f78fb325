"""The links the MLflow client prints ("View run at <portal>/#/experiments/<id>/runs/<run_id>") in
headless Chromium: the fragment never reaches the server, core/mlflow-links.js reads it on whatever
page the portal serves there and replaces it with the portal's page for that run or experiment,
also through the login page when logged out."""

import re

import pytest
from django.test import Client

from portal.tracking.services import experiment_create, log_batch, now_ms, run_create
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def run(db):
    """A run of alice's in an experiment of hers, with a param its page shows."""
    alice = UserFactory(username="alice")
    experiment = experiment_create(user=alice, name="mnist-links")
    run = run_create(user=alice, experiment_id=experiment.pk, start_time=now_ms(), run_name="linked-run",
                     tags=[])
    log_batch(user=alice, run_id=run.run_id, metrics=[], tags=[], params=[{"key": "lr", "value": "0.01"}])
    return run


def _log_in(page, live_server, user) -> None:
    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])


def _run_page(live_server, run) -> str:
    return f"{live_server.url}/tracking/runs/compare/?runs={run.run_id}"


def test_a_run_link_lands_on_the_runs_page(page, live_server, run):
    _log_in(page, live_server, run.owner)
    page.goto(f"{live_server.url}/#/experiments/{run.experiment_id}/runs/{run.run_id}")
    page.wait_for_url(_run_page(live_server, run))
    assert page.locator('#params tr[data-param="lr"] td').inner_text() == "0.01"
    assert "linked-run" in page.locator("#params").text_content()
    # Replaced, not pushed: the tab's history holds its blank page and the run's, not the home page
    # in between, which would forward here again.
    assert page.evaluate("history.length") == 2


def test_an_experiment_link_and_a_link_pasted_on_an_open_page(page, live_server, run):
    _log_in(page, live_server, run.owner)
    page.goto(f"{live_server.url}/#/experiments/{run.experiment_id}")
    page.wait_for_url(f"{live_server.url}/tracking/runs/?experiment={run.experiment_id}")
    assert page.locator(f'tr[data-run="{run.run_id}"]').is_visible()
    page.goto(f"{live_server.url}/jobs/")
    # The same document, only its fragment changed (no load): hashchange.
    page.evaluate(f"location.hash = '#/experiments/{run.experiment_id}/runs/{run.run_id}'")
    page.wait_for_url(_run_page(live_server, run))
    # The pasted link's entry was replaced by the run's: the tab's blank page, the experiment's, the
    # jobs page, the run's.
    assert page.evaluate("history.length") == 4


def test_another_users_run_is_not_found(page, live_server, run):
    _log_in(page, live_server, UserFactory(username="bob"))
    with page.expect_response(_run_page(live_server, run)) as landed:
        page.goto(f"{live_server.url}/#/experiments/{run.experiment_id}/runs/{run.run_id}")
    assert landed.value.status == 404
    assert "linked-run" not in page.content()


def test_other_fragments_are_left_alone(page, live_server, run):
    _log_in(page, live_server, run.owner)
    page.goto(f"{live_server.url}/jobs/#/models/x")
    page.wait_for_load_state("load")
    assert page.url == f"{live_server.url}/jobs/#/models/x"


def test_logged_out_the_link_logs_in_then_lands_on_the_run(page, live_server, run):
    page.goto(f"{live_server.url}/#/experiments/{run.experiment_id}/runs/{run.run_id}")
    # The portal sent the page to log in; the script sent it on to the run page, which asks to log
    # in with itself as `next`.
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/tracking/runs/compare/"))
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.wait_for_url(_run_page(live_server, run))
    assert "linked-run" in page.locator("#params").text_content()
