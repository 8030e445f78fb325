"""Compare runs in headless Chromium: tick runs in the history, compare them; both charts render
(every run's curves, and the seeds' mean with its band) beside the params diff. A screenshot goes to
test-artifacts/compare-runs.png."""

import math
from pathlib import Path

import pytest
from django.test import Client

from portal.tracking.services import experiment_create, log_batch, now_ms, run_create
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _run(user, experiment, name, lr, seed, start):
    run = run_create(user=user, experiment_id=experiment.pk, start_time=start, run_name=name, tags=[])
    noise = 0.06 * seed
    curves = {"loss": lambda step: 2.3 * math.exp(-lr * 10 * step) + noise,
              "accuracy": lambda step: 1 - 0.9 * math.exp(-lr * 8 * step) - noise}
    metrics = [{"key": key, "value": curve(step), "timestamp": start + step, "step": step}
               for step in range(30) for key, curve in curves.items()]
    log_batch(user=user, run_id=run.run_id, metrics=metrics, tags=[],
              params=[{"key": "lr", "value": str(lr)}, {"key": "seed", "value": str(seed)},
                      {"key": "batch_size", "value": "64"}])
    return run


def test_compare_selected_runs(page, live_server):
    ARTIFACTS.mkdir(exist_ok=True)
    alice = UserFactory(username="alice")
    experiment = experiment_create(user=alice, name="lr-sweep")
    runs = [_run(alice, experiment, f"lr{lr}-s{seed}", lr, seed, now_ms() - 600_000 + 60_000 * i)
            for i, (lr, seed) in enumerate([(0.1, 1), (0.1, 2), (0.1, 3), (0.03, 1), (0.03, 2)])]
    client = Client()
    client.force_login(alice)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    page.set_viewport_size({"width": 1100, "height": 900})
    page.goto(f"{live_server.url}/tracking/runs/?experiment={experiment.pk}")
    for run in runs:
        page.locator(f'tr[data-run="{run.run_id}"] input[type=checkbox]').check()
    page.locator("#compare").click()
    page.locator("figure[data-chart='compare-chart-spec'][data-rendered=true]").wait_for()
    page.locator("figure[data-chart='seeds-chart-spec'][data-rendered=true]").wait_for()
    assert page.locator("#params tr.differs th").all_text_contents() == ["lr", "seed"]
    assert page.locator("#seed-groups li").count() == 2
    page.screenshot(path=str(ARTIFACTS / "compare-runs.png"), full_page=True)
