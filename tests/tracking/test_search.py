"""MLflow's filter grammar: the parser alone, then runs/search through the API."""

import pytest

from portal.core.errors import InvalidInput
from portal.tracking.search import (
    Clause,
    OrderTerm,
    page_token_encode,
    page_token_offset,
    parse_filter,
    parse_order_by,
)


def test_parses_mlflows_filters():
    assert parse_filter("metrics.accuracy > 0.9 and params.lr = '0.01'") == [
        Clause("metric", "accuracy", ">", 0.9), Clause("param", "lr", "=", "0.01")]
    assert parse_filter('tags.mlflow.source.type = "LOCAL" AND tags.`my tag` != \'x\'') == [
        Clause("tag", "mlflow.source.type", "=", "LOCAL"), Clause("tag", "my tag", "!=", "x")]
    assert parse_filter('metric."val loss"<=1e-3 and attributes.status IN (\'RUNNING\', \'FINISHED\')') == [
        Clause("metric", "val loss", "<=", 0.001),
        Clause("attribute", "status", "IN", ("RUNNING", "FINISHED"))]
    assert parse_filter("status = 'FINISHED' and attr.start_time >= 5 and params.opt ILIKE 'ad%'") == [
        Clause("attribute", "status", "=", "FINISHED"), Clause("attribute", "start_time", ">=", 5.0),
        Clause("param", "opt", "ILIKE", "ad%")]
    assert parse_filter("run_id NOT IN ('a')") == [Clause("attribute", "run_id", "NOT IN", ("a",))]
    assert parse_filter("") == []


@pytest.mark.parametrize("text", [
    "metrics.a > 1 OR metrics.b > 1",
    "metrics.a > 1 or params.b = 'x'",
    "metrics.a > 'x'",
    "params.lr > 0.1",
    "params.lr = 0.1",
    "metrics.a LIKE '1'",
    "nonsense.a = 'x'",
    "attributes.colour = 'red'",
    "metrics.a > 1 metrics.b > 2",
    "metrics.a >",
    "metrics. = 1",
    "datasets.name = 'x'",
    "params.lr = '0.1' ; DROP TABLE",
    "attributes.run_id IN ('a', ",
])
def test_refuses_what_mlflow_refuses(text):
    with pytest.raises(InvalidInput) as refused:
        parse_filter(text)
    assert "filter" in refused.value.fields


def test_order_by_and_page_tokens():
    assert parse_order_by(["metrics.`val loss` DESC", "params.lr", "start_time asc"]) == [
        OrderTerm("metric", "val loss", False), OrderTerm("param", "lr", True),
        OrderTerm("attribute", "start_time", True)]
    assert page_token_offset(page_token_encode(250)) == 250
    for token in ("%%%", "bm90IGpzb24=", page_token_encode(-1), "eyJvZmZzZXQiOiB0cnVlfQ=="):
        with pytest.raises(InvalidInput):
            page_token_offset(token)


def _logged(alice, experiment_id, name, lr, accuracy, loss, start):
    run_id = alice.run(experiment_id, run_name=name, start_time=start)
    alice.post("runs/log-batch", {
        "run_id": run_id, "params": [{"key": "lr", "value": lr}],
        "tags": [{"key": "sweep.group", "value": name[:1]}],
        "metrics": [{"key": "accuracy", "value": accuracy, "timestamp": 1, "step": 1},
                    {"key": "val loss", "value": loss, "timestamp": 1, "step": 1}]})
    return run_id


def test_runs_search_filters_orders_and_pages(alice):
    experiment_id = alice.post("experiments/create", {"name": "sweep"})["experiment_id"]
    a = _logged(alice, experiment_id, "a1", "0.01", 0.95, 0.3, 1)
    b = _logged(alice, experiment_id, "a2", "0.01", 0.85, 0.2, 2)
    c = _logged(alice, experiment_id, "b1", "0.1", 0.97, "NaN", 3)
    nan = alice.run(experiment_id, start_time=4)
    alice.post("runs/log-metric", {"run_id": nan, "key": "accuracy", "value": "NaN", "timestamp": 1})

    def search(filter_string="", **body):
        found = alice.post("runs/search",
                           {"experiment_ids": [experiment_id], "filter": filter_string, **body})
        return [run["info"]["run_id"] for run in found["runs"]], found.get("next_page_token")

    assert search("metrics.accuracy > 0.9 and params.lr = '0.01'")[0] == [a]
    assert search("metrics.accuracy > 0.9")[0] == [c, a]  # NaN matches no comparison; newest first
    assert search("metrics.`val loss` < 0.25")[0] == [b]
    assert search("tags.sweep.group = 'a'")[0] == [b, a]  # dotted tag key
    assert search("tags.`mlflow.runName` LIKE 'a%'")[0] == [b, a]
    assert search("attributes.run_name ILIKE 'B%'")[0] == [c]
    assert search(f"attributes.run_id IN ('{a}', '{c}')")[0] == [c, a]
    assert search("params.lr != '0.01'")[0] == [c]
    assert search(order_by=["metrics.accuracy DESC"])[0] == [c, a, b, nan]  # NaN after numbers
    assert search(order_by=["metrics.accuracy ASC"])[0] == [b, a, c, nan]
    assert search(order_by=["metrics.`val loss` ASC"])[0][:2] == [b, a]
    assert search(order_by=["params.lr DESC", "attributes.start_time"])[0][:1] == [c]
    first, token = search(max_results=2)
    assert first == [nan, c] and token
    second, token = search(max_results=2, page_token=token)
    assert second == [b, a] and token is None
    either = "metrics.accuracy > 0.9 OR params.lr = '0.01'"
    refused = alice.post("runs/search", {"experiment_ids": [experiment_id], "filter": either}, status=400)
    assert refused["error_code"] == "INVALID_PARAMETER_VALUE"
