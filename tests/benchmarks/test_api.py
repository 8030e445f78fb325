"""The benchmarks, references and usage REST API: filters, visibility, compare, import, references,
usage, and hostile input (a 400 naming the field, never a 5xx)."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.benchmarks.models import BenchmarkResult, Reference
from tests.benchmarks.factories import ResultFactory
from tests.factories import JobFactory, UserFactory
from tests.hostile_corpus import CORPUS

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"


def _client(user):
    _, key = api_token_create(user=user, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def alice():
    return UserFactory(username="alice")


@pytest.fixture
def ada():
    return UserFactory(username="ada", is_staff=True)


def _post(client, path, body):
    return client.post(path, json.dumps(body), content_type="application/json")


def test_list_filters_and_visibility(alice):
    bob = UserFactory(username="bob")
    job = JobFactory(user=bob)
    ResultFactory(user=bob, job=job, gpus=4, flagged=True, flag_reason="low")
    ResultFactory(user=alice, precision="amp", run_at=timezone.now() - timedelta(days=10))
    ResultFactory(user=alice, tool="fio", model="", metric="bw_mib_s", unit="MiB/s", partition="debug")
    client = _client(alice)
    every = client.get("/api/v1/benchmarks/").json()["results"]
    assert len(every) == 3  # the site's results, everybody's
    assert [r["job"] for r in every if r["user"] == "bob"] == [None]  # not alice's job to see
    assert _client(bob).get("/api/v1/benchmarks/?gpus=4").json()["results"][0]["job"] == job.pk
    cases = {
        "tool=fio": 1,
        "precision=amp": 1,
        "gpus=4": 1,
        "flagged=true": 1,
        "flagged=false": 2,
        "partition=debug": 1,
        "gpu_type=a100": 3,
        "model=resnet50": 2,
        "user=bob": 1,
        f"run_before={(timezone.now() - timedelta(days=5)).date()}": 1,
        "page_size=1": 1,
    }
    for query, count in cases.items():
        assert len(client.get(f"/api/v1/benchmarks/?{query}").json()["results"]) == count, query


def test_cursor_pages_are_bounded(alice):
    for _ in range(5):
        ResultFactory(user=alice)
    client = _client(alice)
    page = client.get("/api/v1/benchmarks/?page_size=2").json()
    assert len(page["results"]) == 2 and page["next"]
    seen = {r["id"] for r in page["results"]}
    while page["next"]:
        page = client.get(page["next"]).json()
        seen |= {r["id"] for r in page["results"]}
    assert len(seen) == 5
    assert len(client.get("/api/v1/benchmarks/?page_size=100000").json()["results"]) == 5  # capped at 200


def test_detail_and_compare(alice):
    first, second = ResultFactory(user=alice, value=10.0), ResultFactory(user=alice, gpus=2, value=19.0)
    client = _client(alice)
    detail = client.get(f"/api/v1/benchmarks/{first.pk}/").json()
    assert (
        detail["value"] == 10.0 and detail["data"] == {"parsed": True} and detail["reference_detail"] is None
    )
    assert client.get("/api/v1/benchmarks/999999/").status_code == 404
    body = client.get(f"/api/v1/benchmarks/compare/?ids={second.pk},{first.pk},424242").json()
    assert [r["id"] for r in body["results"]] == [second.pk, first.pk] and body["missing"] == [424242]


@pytest.mark.parametrize("ids", ["", "x", "1,,2", ",".join(["1"] * 21), "1" * 19, "-1", "1;2"])
def test_compare_refuses_bad_ids(alice, ids):
    response = _client(alice).get(f"/api/v1/benchmarks/compare/?ids={ids}")
    assert response.status_code == 400 and "ids" in response.json()["fields"]


def test_import_is_for_admins_and_parses(alice, ada):
    text = (FIXTURES / "nccl/pkb_all_reduce_2nodes.txt").read_text()
    body = {"tool": "nccl", "text": text, "gpu_type": "v100", "partition": "gpu"}
    assert _post(_client(alice), "/api/v1/benchmarks/import/", body).status_code == 403
    response = _post(_client(ada), "/api/v1/benchmarks/import/", body)
    assert response.status_code == 201, response.json()
    [result] = response.json()["results"]
    assert result["parsed"] and result["metric"] == "busbw_gbps" and result["gpu_type"] == "v100"
    assert result["source"] == "import" and result["user"] == "ada"
    unparsed = _post(_client(ada), "/api/v1/benchmarks/import/", {"tool": "fio", "text": "fio: bad option"})
    [kept] = unparsed.json()["results"]
    assert not kept["parsed"] and "fio: bad option" in kept["reason"]


def test_references_set_list_and_flag(alice, ada):
    body = {
        "tool": "tf_cnn_benchmarks",
        "metric": "images_per_sec",
        "value": 100,
        "lower": -0.1,
        "upper": 0.1,
        "model": "resnet50",
        "unit": "images/s",
    }
    assert _post(_client(alice), "/api/v1/references/", body).status_code == 403
    response = _post(_client(ada), "/api/v1/references/", body)
    assert response.status_code == 201, response.json()
    reference = response.json()
    assert (reference["lower_bound"], reference["upper_bound"]) == pytest.approx((90, 110))
    listed = _client(alice).get("/api/v1/references/").json()["results"]
    assert [r["id"] for r in listed] == [reference["id"]]
    # An import below it is flagged, over REST and in the `flagged` filter.
    text = (
        (FIXTURES / "tf_cnn_benchmarks/bitfusion_v100_inception3_tf1.14.txt")
        .read_text()
        .replace("inception3", "resnet50")
    )
    [result] = _post(
        _client(ada), "/api/v1/benchmarks/import/", {"tool": "tf_cnn_benchmarks", "text": text}
    ).json()["results"]
    assert result["flagged"] == (not 90 <= result["value"] <= 110) and result["reference"] == reference["id"]
    flagged = _client(alice).get("/api/v1/benchmarks/?flagged=true").json()["results"]
    assert [r["id"] for r in flagged] == ([result["id"]] if result["flagged"] else [])


def test_reference_derived_over_rest(ada):
    runs = [ResultFactory(value=v) for v in (10.0, 12.0, 14.0)]
    response = _post(
        _client(ada), "/api/v1/references/", {"derive_from": [r.pk for r in runs], "lower": -0.2}
    )
    assert response.status_code == 201, response.json()
    assert response.json()["value"] == 12.0 and response.json()["origin"] == "derived"
    missing = _post(_client(ada), "/api/v1/references/", {"tool": "fio"})
    assert missing.status_code == 400 and {"metric", "value"} <= set(missing.json()["fields"])
    wrong = _post(_client(ada), "/api/v1/references/", {"derive_from": [987654321]})
    assert wrong.status_code == 400 and "derive_from" in wrong.json()["fields"]


def test_published_series_over_rest(alice):
    body = _client(alice).get("/api/v1/references/?kind=published&metric=images_per_sec&page_size=500").json()
    assert body["results"] and all(
        r["source"] and r["citation"].startswith(r["source"]) for r in body["results"]
    )
    assert not Reference.objects.exists()  # published figures are not site references


def test_usage(alice, ada):
    now = timezone.now()
    for state, gpu_hours in (("COMPLETED", 2.0), ("FAILED", 1.0)):
        JobFactory(
            user=alice,
            state=state,
            gpu_hours=gpu_hours,
            submitted_at=now - timedelta(hours=3),
            started_at=now - timedelta(hours=2),
            ended_at=now,
        )
    JobFactory(user=UserFactory(username="bob"), state="COMPLETED", gpu_hours=5.0)
    mine = _client(alice).get("/api/v1/usage/").json()
    assert mine["metrics_url"] == "/api/v1/jobs/{id}/metrics/"
    [row] = mine["rows"]
    assert (row["name"], row["jobs"], row["completed"], row["success_rate"], row["gpu_hours"]) == (
        "alice",
        2,
        1,
        0.5,
        3.0,
    )
    assert row["avg_queue_minutes"] == 60.0
    everybody = _client(ada).get("/api/v1/usage/?period=month&group_by=group").json()["rows"]
    assert sum(r["gpu_hours"] for r in everybody if r["name"] == "portal-users") == 8.0
    bad = _client(alice).get("/api/v1/usage/?since=2026-01-01T00:00:00Z&until=2020-01-01T00:00:00Z")
    assert bad.status_code == 400 and "since" in bad.json()["fields"]


@pytest.mark.parametrize("field", ["tool", "text", "model", "gpus", "precision", "gpu_type", "run_at"])
@pytest.mark.parametrize("value", CORPUS, ids=repr)
def test_hostile_import(ada, field, value):
    body = {"tool": "fio", "text": "x", field: value}
    response = _post(_client(ada), "/api/v1/benchmarks/import/", body)
    assert response.status_code in (201, 400), response.content[:300]
    if response.status_code == 400:
        assert field in response.json()["fields"], response.json()
    else:
        stored = BenchmarkResult.objects.get(pk=response.json()["results"][0]["id"])
        assert "\x00" not in json.dumps(stored.data)


@pytest.mark.parametrize(
    "field", ["tool", "metric", "value", "lower", "upper", "gpus", "partition", "derive_from"]
)
@pytest.mark.parametrize("value", CORPUS, ids=repr)
def test_hostile_reference(ada, field, value):
    body = {"tool": "fio", "metric": "bw_mib_s", "value": 10, field: value}
    response = _post(_client(ada), "/api/v1/references/", body)
    assert response.status_code in (201, 400), response.content[:300]
    if response.status_code == 400:
        assert field in response.json()["fields"], response.json()


@pytest.mark.parametrize(
    "query",
    [
        "gpus=-1",
        "gpus=1e3",
        "gpus=99999999999999999999",
        "tool=nope",
        "run_after=2026-02-30",
        "flagged=maybe",
        "model=%00",
        "model=" + "x" * 500,
        "cursor=%00%ff",
        "user=%0a",
    ],
)
def test_hostile_list_queries(alice, query):
    response = _client(alice).get(f"/api/v1/benchmarks/?{query}")
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
