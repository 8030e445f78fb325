"""The tracking API's shapes and rules, against MLflow's own (what its client sends and expects)."""

import math

from django.test import Client

from portal.tracking.models import LatestMetric, Metric


def test_experiment_create_get_by_name_search_update_delete(alice):
    created = alice.post("experiments/create", {"name": "mnist", "tags": [{"key": "team", "value": "a"}]})
    experiment_id = created["experiment_id"]
    got = alice.get("experiments/get", {"experiment_id": experiment_id})["experiment"]
    assert got["name"] == "mnist" and got["lifecycle_stage"] == "active"
    assert got["artifact_location"] == f"file:///home/alice/gpuportal/mlruns/{experiment_id}"
    assert got["tags"] == [{"key": "team", "value": "a"}]
    by_name = alice.get("experiments/get-by-name", {"experiment_name": "mnist"})["experiment"]
    assert by_name["experiment_id"] == experiment_id
    error = alice.post("experiments/create", {"name": "mnist"}, status=400)
    assert error["error_code"] == "RESOURCE_ALREADY_EXISTS"
    found = alice.post("experiments/search", {"filter": "name LIKE 'mn%'", "max_results": 10})
    assert [e["experiment_id"] for e in found["experiments"]] == [experiment_id]
    alice.post("experiments/update", {"experiment_id": experiment_id, "new_name": "mnist2"})
    alice.post("experiments/delete", {"experiment_id": experiment_id})
    assert alice.post("experiments/search", {})["experiments"] == []
    deleted = alice.post("experiments/search", {"view_type": "DELETED_ONLY"})["experiments"]
    assert [(e["name"], e["lifecycle_stage"]) for e in deleted] == [("mnist2", "deleted")]


def test_get_by_name_of_a_missing_experiment_is_resource_does_not_exist(alice):
    error = alice.get("experiments/get-by-name", {"experiment_name": "nope"}, status=404)
    assert error["error_code"] == "RESOURCE_DOES_NOT_EXIST"


def test_run_lifecycle_and_logging(alice):
    run_id = alice.run(run_name="first", tags=[{"key": "mlflow.user", "value": "root"}])
    alice.post("runs/log-batch", {
        "run_id": run_id,
        "metrics": [{"key": "loss", "value": 1.0, "timestamp": 10, "step": 0},
                    {"key": "loss", "value": 0.5, "timestamp": 20, "step": 1}],
        "params": [{"key": "lr", "value": "0.01"}],
        "tags": [{"key": "mlflow.source.name", "value": "train.py"}]})
    alice.post("runs/log-metric", {"run_id": run_id, "run_uuid": run_id, "key": "acc", "value": 0.9,
                                   "timestamp": "30", "step": "2"})
    alice.post("runs/log-parameter", {"run_id": run_id, "key": "batch", "value": "64"})
    alice.post("runs/set-tag", {"run_id": run_id, "key": "note", "value": "x"})
    alice.post("runs/delete-tag", {"run_id": run_id, "key": "note"})
    assert alice.post("runs/delete-tag", {"run_id": run_id, "key": "note"}, status=404)["error_code"] == \
        "RESOURCE_DOES_NOT_EXIST"
    info = alice.post("runs/update", {"run_id": run_id, "status": "FINISHED", "end_time": 99})["run_info"]
    assert (info["status"], info["end_time"]) == ("FINISHED", 99)
    run = alice.get("runs/get", {"run_id": run_id})["run"]
    assert run["info"]["run_name"] == "first" and run["info"]["user_id"] == "alice"
    assert run["info"]["artifact_uri"].endswith(f"/{run_id}/artifacts")
    assert run["info"]["artifact_uri"].startswith("file:///home/alice/gpuportal/mlruns/")
    assert sorted((m["key"], m["value"], m["step"]) for m in run["data"]["metrics"]) == [
        ("acc", 0.9, 2), ("loss", 0.5, 1)]
    assert {p["key"]: p["value"] for p in run["data"]["params"]} == {"lr": "0.01", "batch": "64"}
    tags = {t["key"]: t["value"] for t in run["data"]["tags"]}
    assert tags["mlflow.user"] == "alice" and tags["mlflow.runName"] == "first" and "note" not in tags
    history = alice.get("metrics/get-history", {"run_id": run_id, "metric_key": "loss"})["metrics"]
    assert [(m["step"], m["value"], m["timestamp"]) for m in history] == [(0, 1.0, 10), (1, 0.5, 20)]
    alice.post("runs/delete", {"run_id": run_id})
    assert alice.get("runs/get", {"run_id": run_id})["run"]["info"]["lifecycle_stage"] == "deleted"
    refused = alice.post("runs/log-parameter", {"run_id": run_id, "key": "x", "value": "1"}, status=400)
    assert refused["error_code"] == "INVALID_PARAMETER_VALUE"


def test_latest_metric_is_the_greatest_step_not_the_last_logged(alice):
    run_id = alice.run()
    for step, value in ((5, 0.5), (2, 0.2), (5, 0.4)):
        alice.post("runs/log-metric",
                   {"run_id": run_id, "key": "m", "value": value, "timestamp": 1, "step": step})
    assert LatestMetric.objects.get(key="m").value == 0.5


def test_nan_kept_and_infinity_clamped_as_mlflow_does(alice):
    run_id = alice.run()
    for step, value in enumerate(["NaN", "Infinity", "-Infinity"]):
        alice.post("runs/log-metric",
                   {"run_id": run_id, "key": "m", "value": value, "timestamp": 1, "step": step})
    # A NaN literal, as a hand-written client's json.dumps sends it.
    response = alice.client.post("/api/2.0/mlflow/runs/log-metric", content_type="application/json",
                                 data=f'{{"run_id": "{run_id}", "key": "n", "value": NaN, "timestamp": 1}}')
    assert response.status_code == 200, response.content
    assert math.isnan(Metric.objects.get(key="n").value)
    history = alice.get("metrics/get-history", {"run_id": run_id, "metric_key": "m"})["metrics"]
    assert [m["value"] for m in history] == ["NaN", 1.7976931348623157e308, -1.7976931348623157e308]


def test_limits_are_mlflows(alice):
    run_id = alice.run()
    long_param = alice.post("runs/log-parameter", {"run_id": run_id, "key": "p", "value": "x" * 6001},
                            status=400)
    assert long_param["error_code"] == "INVALID_PARAMETER_VALUE" and "6000" in long_param["message"]
    alice.post("runs/log-parameter", {"run_id": run_id, "key": "p", "value": "x" * 6000})
    long_key = alice.post("runs/set-tag", {"run_id": run_id, "key": "k" * 251, "value": "v"}, status=400)
    assert long_key["error_code"] == "INVALID_PARAMETER_VALUE" and "250" in long_key["message"]
    metrics = [{"key": "m", "value": 1, "timestamp": 1, "step": i} for i in range(1001)]
    too_many = alice.post("runs/log-batch", {"run_id": run_id, "metrics": metrics}, status=400)
    assert too_many["error_code"] == "INVALID_PARAMETER_VALUE" and "1000" in too_many["message"]
    alice.post("runs/log-batch", {"run_id": run_id, "metrics": metrics[:1000]})
    assert Metric.objects.count() == 1000


def test_params_are_immutable(alice):
    run_id = alice.run()
    alice.post("runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "0.1"})
    alice.post("runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "0.1"})  # the same: fine
    changed = alice.post("runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "0.2"}, status=400)
    assert changed["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "Changing param values is not allowed" in changed["message"]


def test_malformed_requests_name_the_field(alice):
    run_id = alice.run()
    cases = [
        ("runs/log-metric", {"run_id": run_id, "key": "m", "value": "hi", "timestamp": 1},
         "metrics[0].value"),
        ("runs/log-metric", {"run_id": run_id, "key": "m", "value": 1}, "metrics[0].timestamp"),
        ("runs/log-metric", {"run_id": run_id, "key": "../x", "value": 1, "timestamp": 1}, "metrics[0].key"),
        ("runs/log-batch", {"run_id": run_id, "metrics": "many"}, "metrics"),
        ("runs/create", {"experiment_id": "abc"}, "experiment_id"),
        ("runs/update", {"status": "DONE"}, "run_id"),
        ("runs/update", {"run_id": run_id, "status": "DONE"}, "status"),
        ("experiments/create", {}, "name"),
        ("experiments/create", {"name": "x", "artifact_location": "/etc"}, "artifact_location"),
        ("runs/search", {"experiment_ids": ["0"], "max_results": 50001}, "max_results"),
        ("runs/search", {"experiment_ids": ["0"], "page_token": "%%%"}, "page_token"),
        ("runs/search", {"experiment_ids": ["0"], "order_by": ["metrics.m SIDEWAYS"]}, "order_by"),
    ]
    for path, body, field in cases:
        error = alice.post(path, body, status=400)
        assert error["error_code"] == "INVALID_PARAMETER_VALUE", (path, body, error)
        assert field in error["message"], (path, body, error)
    response = alice.client.post("/api/2.0/mlflow/runs/create", data="{", content_type="application/json")
    assert response.status_code == 400 and response.json()["error_code"] == "INVALID_PARAMETER_VALUE"


def test_another_users_objects_do_not_exist_for_bob(alice, bob):
    experiment_id = alice.post("experiments/create", {"name": "secret"})["experiment_id"]
    run_id = alice.run(experiment_id)
    alice.post("runs/log-metric", {"run_id": run_id, "key": "m", "value": 1, "timestamp": 1})
    for path, params in (("runs/get", {"run_id": run_id}),
                         ("metrics/get-history", {"run_id": run_id, "metric_key": "m"}),
                         ("experiments/get", {"experiment_id": experiment_id}),
                         ("experiments/get-by-name", {"experiment_name": "secret"})):
        assert bob.get(path, params, status=404)["error_code"] == "RESOURCE_DOES_NOT_EXIST", path
    for path, body in (("runs/log-metric", {"run_id": run_id, "key": "m", "value": 2, "timestamp": 1}),
                       ("runs/update", {"run_id": run_id, "status": "KILLED"}),
                       ("runs/delete", {"run_id": run_id}),
                       ("runs/create", {"experiment_id": experiment_id}),
                       ("experiments/delete", {"experiment_id": experiment_id})):
        assert bob.post(path, body, status=404)["error_code"] == "RESOURCE_DOES_NOT_EXIST", path
    assert bob.post("runs/search", {"experiment_ids": [experiment_id, "0"]})["runs"] == []
    assert bob.post("experiments/search", {})["experiments"] == []
    # Bob's own experiment may have Alice's name: names are per user.
    bob.post("experiments/create", {"name": "secret"})


def test_admins_read_everybodys_runs_but_write_only_their_own(alice, bob):
    from portal.accounts.models import User

    run_id = alice.run()
    User.objects.filter(username="bob").update(is_staff=True)
    assert bob.get("runs/get", {"run_id": run_id})["run"]["info"]["user_id"] == "alice"
    assert bob.post("runs/delete", {"run_id": run_id}, status=404)["error_code"] == "RESOURCE_DOES_NOT_EXIST"


def test_other_mlflow_paths_are_not_implemented_and_auth_is_required(alice):
    response = alice.client.post("/api/2.0/mlflow/traces", data="{}", content_type="application/json")
    assert response.status_code == 501 and response.json()["error_code"] == "NOT_IMPLEMENTED"
    response = alice.client.get("/api/2.0/mlflow-artifacts/artifacts/x")
    assert response.status_code == 501 and response.json()["error_code"] == "NOT_IMPLEMENTED"
    response = alice.client.get("/api/2.0/mlflow/runs/search")
    assert response.status_code == 404 and response.json()["error_code"] == "ENDPOINT_NOT_FOUND"
    assert alice.post("logged-models/search", {"experiment_ids": ["0"]}) == {"models": []}
    anonymous = Client().post("/api/2.0/mlflow/runs/create", data="{}", content_type="application/json")
    assert anonymous.status_code == 401 and anonymous.json()["error_code"] == "UNAUTHENTICATED"
    wrong = Client(HTTP_AUTHORIZATION="Bearer job:1:forged").get("/api/2.0/mlflow/runs/get", {"run_id": "a"})
    assert wrong.status_code == 401 and wrong.json()["error_code"] == "UNAUTHENTICATED"


def test_metric_history_pages_follow_on(alice):
    run_id = alice.run()
    metrics = [{"key": "loss", "value": step / 10, "timestamp": 7, "step": step} for step in (3, 1, 4, 1, 5)]
    alice.post("runs/log-batch", {"run_id": run_id, "metrics": metrics})
    steps, token = [], None
    while True:
        page = alice.get("metrics/get-history", {"run_id": run_id, "metric_key": "loss", "max_results": 2,
                                                 **({"page_token": token} if token else {})})
        steps += [point["step"] for point in page["metrics"]]
        if not (token := page.get("next_page_token")):
            break
    assert steps == [1, 1, 3, 4, 5]
    for bad in ("%%%", "eyJhZnRlciI6IFsxLCAyXX0=", "eyJvZmZzZXQiOiAyfQ=="):
        error = alice.get("metrics/get-history", {"run_id": run_id, "metric_key": "loss", "page_token": bad},
                          status=400)
        assert error["error_code"] == "INVALID_PARAMETER_VALUE" and "page_token" in error["message"]
