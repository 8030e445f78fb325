"""Compare runs (#21): the run history page and the comparison of some of one's runs: curves overlaid,
a diff of params, and runs that differ only in their seed as a mean with its min-max band."""

import pytest
from django.test import Client

from portal.tracking.compare import compare_run_ids, runs_compare
from portal.tracking.services import experiment_create, log_batch, run_create
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


def _run(user, experiment, name, params, losses, start):
    run = run_create(user=user, experiment_id=experiment.pk, start_time=start, run_name=name, tags=[])
    log_batch(user=user, run_id=run.run_id, tags=[],
              params=[{"key": key, "value": str(value)} for key, value in params.items()],
              metrics=[{"key": "loss", "value": value, "timestamp": start + step, "step": step}
                       for step, value in enumerate(losses)])
    return run


@pytest.fixture
def alice():
    return UserFactory(username="alice")


@pytest.fixture
def sweep(alice):
    """Two seeds of lr=0.1, one run of lr=0.01 (seed 1), one without a seed."""
    experiment = experiment_create(user=alice, name="lr")
    return [_run(alice, experiment, "a", {"lr": 0.1, "seed": 1}, [1.0, 0.5], 1000),
            _run(alice, experiment, "b", {"lr": 0.1, "seed": 2}, [3.0, 0.7], 2000),
            _run(alice, experiment, "c", {"lr": 0.01, "seed": 1}, [2.0, 1.5], 3000),
            _run(alice, experiment, "d", {"lr": 0.01, "batch": 64}, [2.5], 4000)]


def test_params_diff_curves_and_seed_groups(alice, sweep):
    comparison = runs_compare(user=alice, run_ids=[run.run_id for run in sweep])
    assert comparison.labels == ["a", "b", "c", "d"]
    rows = {row.key: row for row in comparison.params}
    assert rows["lr"].values == ["0.1", "0.1", "0.01", "0.01"] and rows["lr"].differs
    assert rows["seed"].values == ["1", "2", "1", None] and rows["batch"].values == [None, None, None, "64"]
    # One line per run and key, each run's points.
    lines = {(row["run"], row["step"]): row["value"] for row in comparison.chart["data"]["values"]}
    assert lines == {("a", 0): 1.0, ("a", 1): 0.5, ("b", 0): 3.0, ("b", 1): 0.7, ("c", 0): 2.0, ("c", 1): 1.5,
                     ("d", 0): 2.5}
    # a and b differ only in their seed: one group, labelled by what sets it apart.
    [group] = comparison.groups
    assert [run.run_name for run in group.runs] == ["a", "b"] and group.label == "lr=0.1 (2 seeds)"
    band = comparison.seed_chart["data"]["values"]
    assert [(r["step"], r["mean"], r["min"], r["max"], r["runs"]) for r in band] == [
        (0, 2.0, 1.0, 3.0, 2), (1, 0.6, 0.5, 0.7, 2)]
    assert [layer["mark"]["type"] for layer in comparison.seed_chart["spec"]["layer"]] == ["area", "line"]


def test_no_seed_group_without_two_seeds(alice, sweep):
    comparison = runs_compare(user=alice, run_ids=[sweep[0].run_id, sweep[2].run_id])
    assert comparison.groups == [] and comparison.seed_chart is None and comparison.chart is not None


def test_run_ids_from_checkboxes_or_commas():
    a, b = "a" * 32, "b" * 32
    assert compare_run_ids([a, b, a]) == [a, b] == compare_run_ids([f"{a},{b}"])


def test_history_page_lists_ones_own_runs_newest_first_and_filters_by_experiment(client, alice, sweep):
    bob = UserFactory(username="bob")
    theirs = _run(bob, experiment_create(user=bob, name="lr"), "bobs", {"lr": 1}, [1.0], 5000)
    other = experiment_create(user=alice, name="other")
    _run(alice, other, "elsewhere", {}, [], 6000)
    client.force_login(alice)
    page = client.get("/tracking/runs/").content.decode()
    order = [page.index(f'data-run="{run.run_id}"') for run in reversed(sweep)]
    assert order == sorted(order) and "elsewhere" in page and theirs.run_id not in page
    filtered = client.get(f"/tracking/runs/?experiment={sweep[0].experiment_id}").content.decode()
    assert "elsewhere" not in filtered and sweep[0].run_id in filtered
    assert client.get(f"/tracking/runs/?experiment={theirs.experiment_id}").status_code == 404
    assert client.get("/tracking/runs/?experiment=x").status_code == 404


def test_compare_page_highlights_differing_params_and_is_owner_only(client, alice, sweep):
    client.force_login(alice)
    response = client.get("/tracking/runs/compare/", {"runs": [run.run_id for run in sweep]})
    page = response.content.decode()
    assert response.status_code == 200
    assert '<tr data-param="lr" class="differs">' in page and 'id="compare-chart"' in page
    assert 'id="seeds-chart"' in page and "lr=0.1 (2 seeds)" in page
    bob = Client()
    bob.force_login(UserFactory(username="bob"))
    assert bob.get(f"/tracking/runs/compare/?runs={sweep[0].run_id}").status_code == 404
    admin = Client()
    admin.force_login(UserFactory(username="root", is_staff=True))
    assert admin.get(f"/tracking/runs/compare/?runs={sweep[0].run_id}").status_code == 404
    assert client.get(f"/tracking/runs/compare/?runs={'f' * 32}").status_code == 404


@pytest.mark.parametrize(("query", "message"), [
    ("", "Select at least one run."),
    ("runs=nope", "Not a run id: &#x27;nope&#x27;."),
    ("runs=" + ",".join(f"{i:032x}" for i in range(21)), "Compare at most 20 runs at once."),
])
def test_bad_selections_are_a_400_saying_why(client, alice, query, message):
    client.force_login(alice)
    response = client.get(f"/tracking/runs/compare/?{query}")
    assert response.status_code == 400 and message in response.content.decode()


def test_the_api_answers_what_the_page_shows(alice, sweep):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(alice)
    body = api.get(f"/api/v1/runs/compare/?runs={','.join(run.run_id for run in sweep)}").json()
    assert [run["label"] for run in body["runs"]] == ["a", "b", "c", "d"]
    assert {row["key"]: row["differs"] for row in body["params"]} == {"batch": True, "lr": True, "seed": True}
    curves = {(curve["run"], curve["key"]): curve["values"] for curve in body["curves"]}
    assert curves[("a", "loss")] == [1.0, 0.5]
    [group] = body["seed_groups"]
    assert group["run_ids"] == [sweep[0].run_id, sweep[1].run_id]
    assert [(p["key"], p["step"], p["mean"], p["min"], p["max"]) for p in group["points"]] == [
        ("loss", 0, 2.0, 1.0, 3.0), ("loss", 1, 0.6, 0.5, 0.7)]
    response = api.get("/api/v1/runs/compare/?runs=nope")
    assert response.status_code == 400 and "runs" in response.json()["fields"], response.json()
    api.force_authenticate(UserFactory(username="bob"))
    assert api.get(f"/api/v1/runs/compare/?runs={sweep[0].run_id}").status_code == 404
