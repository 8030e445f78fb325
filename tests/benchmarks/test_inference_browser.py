"""An inference result in headless Chromium: the V100 ResNet-50 run entered by hand renders its three
charts with the published TensorRT figures, and its tables, with no serious or critical axe-core
violation; a screenshot in test-artifacts/."""

from pathlib import Path

import pytest

from portal.benchmarks.services import published_load, result_import
from tests.browser.test_accessibility_browser import AXE, WCAG_TAGS
from tests.factories import UserFactory

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
FIXTURES = Path(__file__).parent / "fixtures"


def test_inference_result_page_draws_its_charts(browser, live_server):
    published_load()  # a transactional test database starts without the migration's rows
    UserFactory(username="alice")
    admin = UserFactory(username="ada", is_staff=True)
    text = (FIXTURES / "inference/bed_resnet50_smoke_random_weights.txt").read_text()
    [result, *_] = result_import(user=admin, tool="inference", text=text,
                                 context={"gpu_type": "v100", "model": "resnet50", "gpus": 1})
    # axe-core goes in as a script of the test's: the page's CSP would refuse it.
    page = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 800}).new_page()
    page.goto(f"{live_server.url}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.goto(f"{live_server.url}/benchmarks/{result.pk}/")
    for chart in ("inference-throughput", "inference-latency", "inference-speedup"):
        page.wait_for_selector(f"figure[data-chart={chart}-spec][data-rendered=true]")
    assert "Chart failed to render" not in page.content()
    assert page.locator("#inference-table tbody tr").count() == 4
    assert page.locator("#inference-accuracy tbody tr").count() == 2
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags},
                                                        resultTypes: ['violations']})""", WCAG_TAGS)
    serious = [(v["id"], [n["target"] for n in v["nodes"]]) for v in found["violations"]
               if v["impact"] in ("serious", "critical")]
    assert serious == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "inference-result.png", full_page=True)
