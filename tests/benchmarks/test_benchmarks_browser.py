"""alice in headless Chromium: history -> compare two runs, the scaling chart with its published
overlay, and the usage page; screenshots in test-artifacts/."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from portal.benchmarks.services import published_load
from tests.benchmarks.factories import ResultFactory
from tests.browser.nav import go
from tests.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def seeded():
    published_load()  # a transactional test database starts without the migration's rows
    alice = UserFactory(username="alice")
    now = timezone.now()
    results = {}
    for gpus, value in ((1, 11.6), (2, 21.0), (4, 37.5)):
        results[gpus] = ResultFactory(
            user=alice, gpus=gpus, value=value, run_at=now - timedelta(minutes=gpus)
        )
    results[4].flagged, results[4].flag_reason = (
        True,
        "37.5 images/s is outside [417.6, 510.4] (reference 464)",
    )
    results[4].save()
    for days, state, hours in ((1, "COMPLETED", 2.0), (9, "FAILED", 0.5), (20, "COMPLETED", 4.0)):
        JobFactory(
            user=alice,
            state=state,
            gpu_hours=hours,
            submitted_at=now - timedelta(days=days),
            started_at=now - timedelta(days=days) + timedelta(minutes=3),
        )
    return results


def _login(page, live_server):
    page.goto(f"{live_server.url}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")


def test_compare_scaling_and_usage(page, live_server, seeded):
    ARTIFACTS.mkdir(exist_ok=True)
    _login(page, live_server)
    go(page, "benchmarks-link")
    assert page.locator("#results tr.flagged").count() == 1
    page.screenshot(path=ARTIFACTS / "benchmarks-history.png", full_page=True)
    page.check(f'input[name=ids][value="{seeded[1].pk}"]')
    page.check(f'input[name=ids][value="{seeded[4].pk}"]')
    page.click("#compare")
    page.wait_for_selector("figure[data-rendered=true]")
    assert page.locator("#compare-table th a").count() == 2
    page.screenshot(path=ARTIFACTS / "benchmarks-compare.png", full_page=True)
    page.click(f'#compare-table a[href="/benchmarks/{seeded[4].pk}/"]')
    assert "outside [417.6, 510.4]" in page.locator("#flag").inner_text()
    page.wait_for_selector("figure[data-rendered=true]")
    page.screenshot(path=ARTIFACTS / "benchmarks-result-flagged.png", full_page=True)

    page.goto(f"{live_server.url}/benchmarks/charts/?kind=scaling&model=resnet50&precision=fp32")
    page.wait_for_selector("figure[data-rendered=true]")
    spec = json.loads(page.locator("#chart-spec").text_content())
    series = {row["series"] for row in spec["data"]["values"]}
    assert any(s.startswith("Published: Dell EMC") for s in series) and "Ideal (linear from 1 GPU)" in series
    assert page.locator("#chart canvas, #chart svg").count() >= 1
    # Its text alternative: the drawing is one named image, its rows a table under it.
    drawing = page.locator("#chart canvas, #chart svg").first
    assert drawing.get_attribute("role") == "img" and "table below" in drawing.get_attribute("aria-label")
    table = page.locator("figure[data-chart=chart-spec] .chart-table")
    table.locator("summary").click()
    assert table.locator("tbody tr").count() == len(spec["data"]["values"])
    assert table.locator("th[scope=col]").count() == len(spec["data"]["values"][0])
    page.screenshot(path=ARTIFACTS / "benchmarks-scaling.png", full_page=True)

    for kind in ("p2p", "storage"):  # published overlays: a second heat map, labelled rules
        page.goto(f"{live_server.url}/benchmarks/charts/?kind={kind}")
        page.wait_for_selector("figure[data-rendered=true]")
        page.screenshot(path=ARTIFACTS / f"benchmarks-{kind}.png", full_page=True)

    go(page, "usage-link")
    page.wait_for_selector("figure[data-rendered=true]")
    assert page.locator("#usage tr").count() >= 3
    with page.expect_download() as download:
        page.click("#usage-csv")
    assert download.value.suggested_filename == "usage.csv"
    page.screenshot(path=ARTIFACTS / "usage.png", full_page=True)


def test_a_charts_csv_defuses_formulas_as_the_servers_does(page, live_server, seeded):
    """#33: a run or user named `=HYPERLINK(...)` reaches an admin's spreadsheet as text, not a
    formula; numbers, negative ones too, stay numbers."""
    _login(page, live_server)
    page.goto(f"{live_server.url}/benchmarks/charts/?kind=scaling&model=resnet50&precision=fp32")
    page.wait_for_selector("figure[data-rendered=true]")
    csv = page.evaluate("""portalCharts.csv([
        {name: '=HYPERLINK("http://x","y")', user: "@bob", note: "-1+2", value: -3.5},
        {name: "plain", user: "a,b", note: "line\\nbreak", value: 7}])""")
    assert csv.splitlines()[:2] == ["name,user,note,value", '"\'=HYPERLINK(""http://x"",""y"")",\'@bob,\'-1+2,-3.5']
    assert '"a,b"' in csv and '"line\nbreak"' in csv
