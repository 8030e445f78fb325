"""Benchmark and usage pages: history with filters, a result (flagged, unparsed), compare, every
chart, the admin import page, usage with its CSV; one bulk query per page, none per row."""

import csv
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.benchmarks.models import BenchmarkResult
from portal.benchmarks.parsers import parse
from portal.benchmarks.services import reference_create
from tests.benchmarks.factories import ResultFactory
from tests.factories import JobFactory, UserFactory
from tests.ports import free_port

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def alice_client(client):
    client.force_login(UserFactory(username="alice"))
    return client


def _spec(response, chart_id):
    html = response.content.decode()
    start = html.index(f'id="{chart_id}-spec"')
    return json.loads(html[html.index(">", start) + 1 : html.index("</script>", start)])


def test_history_filters_and_flags(alice_client):
    ResultFactory(flagged=True, flag_reason="41.5 images/s is outside [90, -]")
    ResultFactory(gpus=2)
    ResultFactory(parsed=False, value=None, metric="", reason="no 'total images/sec' line")
    page = alice_client.get("/benchmarks/")
    html = page.content.decode()
    assert page.status_code == 200 and html.count("data-result=") == 3
    assert "flagged" in html and "is outside [90" in html and "no &#x27;total images/sec&#x27; line" in html
    assert alice_client.get("/benchmarks/?flagged=1").content.decode().count("data-result=") == 1
    assert alice_client.get("/benchmarks/?gpus=2").content.decode().count("data-result=") == 1
    # Malformed filters are ignored, as on the jobs page; never an error.
    assert alice_client.get("/benchmarks/?gpus=x&from=2026-02-30&tool=%00&before=abc").status_code == 200


def test_history_pages_with_a_keyset_in_a_fixed_number_of_queries(alice_client):
    for _ in range(60):
        ResultFactory()
    alice_client.get("/benchmarks/")  # warm the filter menus' cache
    with CaptureQueriesContext(connection) as queries:
        first = alice_client.get("/benchmarks/")
    assert len(queries) <= 6, [q["sql"] for q in queries]
    assert first.content.decode().count("data-result=") == 50 and 'id="older"' in first.content.decode()
    older = first.content.decode().split('id="older"')[0].rsplit('href="?', 1)[1].split('"')[0]
    second = alice_client.get("/benchmarks/?" + older.replace("&amp;", "&"))
    assert second.content.decode().count("data-result=") == 10


def test_result_page_flag_job_link_and_charts(alice_client):
    owner = UserFactory(username="alice")
    job = JobFactory(user=owner)
    mine = ResultFactory(user=owner, job=job, flagged=True, flag_reason="too slow")
    page = alice_client.get(f"/benchmarks/{mine.pk}/").content.decode()
    assert 'id="flag"' in page and "too slow" in page and f"/jobs/{job.pk}/" in page
    theirs = ResultFactory(user=UserFactory(username="bob"), job=JobFactory(user=UserFactory(username="bob")))
    assert f"/jobs/{theirs.job_id}/" not in alice_client.get(f"/benchmarks/{theirs.pk}/").content.decode()
    nccl_text = (FIXTURES / "nccl/a3mega_h100_2nodes_all_reduce.txt").read_text()
    nccl = ResultFactory(tool="nccl", metric="busbw_gbps", data=parse("nccl", nccl_text), value=338.8)
    spec = _spec(alice_client.get(f"/benchmarks/{nccl.pk}/"), "nccl")
    assert spec["layer"][0]["encoding"]["x"]["scale"]["type"] == "log" and len(spec["data"]["values"]) > 10
    p2p = ResultFactory(
        tool="p2p",
        metric="p2p_bidir_min_gbps",
        value=6.1,
        data=parse("p2p", (FIXTURES / "p2p/autodl_2x2080ti_p2p_disabled.txt").read_text()),
    )
    heat = _spec(alice_client.get(f"/benchmarks/{p2p.pk}/"), "p2p")
    assert heat["spec"]["layer"][0]["mark"] == "rect" and heat["facet"]["column"]["field"] == "series"
    assert len([r for r in heat["data"]["values"] if r["kind"] == "measured"]) == 4
    published = [r for r in heat["data"]["values"] if r["kind"] == "published"]
    assert len(published) == 16 and all("Slurm Scheduler" in r["source"] for r in published)
    assert heat["title"]["subtitle"][0].startswith("Published: Dell EMC")
    unparsed = ResultFactory(parsed=False, value=None, reason="fio: failed parsing rw=bogus")
    assert "fio: failed parsing rw=bogus" in alice_client.get(f"/benchmarks/{unparsed.pk}/").content.decode()
    assert alice_client.get("/benchmarks/999999/").status_code == 404


def test_compare_page(alice_client):
    first, second = ResultFactory(value=10.0), ResultFactory(gpus=2, value=18.0, flagged=True)
    page = alice_client.get(f"/benchmarks/compare/?ids={first.pk}&ids={second.pk}")
    html = page.content.decode()
    assert page.status_code == 200 and f"#{first.pk}" in html and f"#{second.pk}" in html
    assert [row["value"] for row in _spec(page, "compare")["data"]["values"]] == [10.0, 18.0]
    assert alice_client.get("/benchmarks/compare/?ids=x,%00").status_code == 200


def test_every_chart_renders_with_csv_rows(alice_client):
    for gpus, value in ((1, 100.0), (2, 180.0), (4, 300.0)):
        ResultFactory(gpus=gpus, value=value)
        ResultFactory(gpus=gpus, value=value * 2.5, precision="amp")
    scaling = _spec(
        alice_client.get("/benchmarks/charts/?kind=scaling&model=resnet50&precision=fp32"), "chart"
    )
    measured = {r["gpus"]: r for r in scaling["data"]["values"] if r["kind"] == "measured"}
    assert measured[4]["efficiency_pct"] == 75.0 and measured[4]["ideal_images_per_sec"] == 400.0
    published = [r for r in scaling["data"]["values"] if r["kind"] == "published"]
    assert published and all("Dell" in r["series"] and r["source"] for r in published)
    columns = {tuple(sorted(row)) for row in scaling["data"]["values"]}
    assert len(columns) == 1  # one table: its CSV is whole
    no_overlay = _spec(alice_client.get("/benchmarks/charts/?kind=scaling&model=resnet50&overlay=0"), "chart")
    assert not [r for r in no_overlay["data"]["values"] if r["kind"] == "published"]
    precision = _spec(alice_client.get("/benchmarks/charts/?kind=precision&model=resnet50"), "chart")
    assert {
        (r["gpus"], r["speedup_vs_fp32"]) for r in precision["data"]["values"] if r["precision"] == "amp"
    } == {(1, 2.5), (2, 2.5), (4, 2.5)}
    fio = (FIXTURES / "fio/mixed_jsonplus_3.33.json").read_text()
    ResultFactory(tool="fio", case="write 8k", metric="bw_mib_s", value=50.0, data=parse("fio", fio))
    storage = _spec(alice_client.get("/benchmarks/charts/?kind=storage&measure=iops"), "chart")
    assert storage["data"]["values"][0]["iops"] > 0
    ada = UserFactory(username="ada", is_staff=True)
    reference_create(
        user=ada,
        tool="fio",
        metric="bw_mib_s",
        value=40.0,
        lower=-0.1,
        upper=None,
        case="write 8k",
        unit="MiB/s",
    )
    overlaid = _spec(alice_client.get("/benchmarks/charts/?kind=storage&references=1"), "chart")
    rules = {r["reference"]: r["bw_mib_s"] for r in overlaid["data"]["values"] if r["kind"] == "reference"}
    assert [v for k, v in rules.items() if k.startswith("Reference #")] == [40.0]
    assert sorted(v for k, v in rules.items() if k.startswith("Published: fio read") and "Dell EMC" in k) == [
        4729.3,
        18047.3,
    ]
    assert (
        len({tuple(sorted(r)) for r in overlaid["data"]["values"]}) == 1
        and overlaid["layer"][-1]["mark"]["type"] == "rule"
    )
    only_published = _spec(alice_client.get("/benchmarks/charts/?kind=p2p"), "chart")
    assert {r["kind"] for r in only_published["data"]["values"]} == {"published"}
    for kind in ("nccl", "history", "bogus"):
        assert alice_client.get(f"/benchmarks/charts/?kind={kind}&references=1").status_code == 200


def test_admin_import_page(client):
    client.force_login(UserFactory(username="ada", is_staff=True))
    upload = io.BytesIO((FIXTURES / "fio/randread_3.33.json").read_bytes())
    upload.name = "fio.json"
    response = client.post("/benchmarks/import/", {"tool": "fio", "file": upload, "gpu_type": "a100"})
    result = BenchmarkResult.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/benchmarks/{result.pk}/"
    assert (result.case, result.gpu_type, result.source) == ("randread 4k", "a100", "import")
    refused = client.post("/benchmarks/import/", {"tool": "fio", "text": "x", "gpus": "-1"})
    assert refused.status_code == 400 and "gpus" in refused.content.decode()


def test_usage_page_and_csv(client):
    alice = UserFactory(username="alice")
    now = timezone.now()
    JobFactory(
        user=alice,
        name="=cmd()",
        gpu_hours=1.5,
        submitted_at=now - timedelta(hours=1),
        started_at=now - timedelta(minutes=30),
        ended_at=now,
    )
    UserFactory(username="=HYPERLINK(1)")  # a hostile directory name never runs in a spreadsheet
    JobFactory(user=UserFactory(username="=HYPERLINK(1)"), gpu_hours=2.0)
    client.force_login(alice)
    page = client.get("/usage/?period=month")
    assert page.status_code == 200 and 'id="usage"' in page.content.decode()
    rows = list(csv.DictReader(io.StringIO(client.get("/usage/csv/?period=month").content.decode())))
    assert [(r["name"], r["gpu_hours"], r["avg_queue_minutes"]) for r in rows] == [("alice", "1.5", "30.0")]
    client.force_login(UserFactory(username="ada", is_staff=True))
    names = {r["name"] for r in csv.DictReader(io.StringIO(client.get("/usage/csv/").content.decode()))}
    assert names == {"alice", "'=HYPERLINK(1)"}
    groups = client.get("/usage/csv/?group_by=group").content.decode()
    assert "portal-users" in groups
    assert client.get("/usage/?from=2026-01-01&to=2020-01-01").status_code == 200  # says why, no error


def test_benchmark_pages_answer_with_the_cache_down(alice_client, settings):
    """Redis restarting (the chaos soak, bench/load/chaos.py): the filter menus come from the
    database instead of the cache, never a 500. A real Redis client, at a port nobody listens on."""
    ResultFactory()
    nobody = f"redis://127.0.0.1:{free_port()}/0"
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": nobody}}
    for path in ("/benchmarks/", "/benchmarks/charts/"):
        response = alice_client.get(path)
        assert response.status_code == 200, (path, response.status_code)
