"""The cluster page with two clusters (#38), one of them stale, in headless Chromium at a desktop's
and a phone's width: axe-core (WCAG 2.0 and 2.1, A and AA) finds no serious or critical violation,
and nothing overflows at 390 px (a table scrolls inside itself). One cluster's page is in the crawl
of tests/browser/test_accessibility_browser.py."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.cluster.models import PollStatus
from tests.browser.test_accessibility_browser import AXE, FAILING, NARROW, WIDTHS, _check_page, _login
from tests.cluster.test_cluster_page import _snapshot
from tests.clusters import clusters_dir

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_the_page_of_two_clusters_passes_axe_and_fits_a_phone(live_server, browser, tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    _snapshot("gpuportal", nodes=4, gpus=4, used=1, running=3, pending=1)
    _snapshot("cluster-b", nodes=1, gpus=2, used=2, state="down*", pending=2)
    now = timezone.now()
    PollStatus.objects.update_or_create(pk=1, defaults={"checked_at": now, "refreshed_at": now, "error": ""})
    PollStatus.objects.create(cluster="cluster-b", checked_at=now, refreshed_at=now - timedelta(minutes=9),
                              error="Slurm did not answer: Unable to contact slurm controller")
    problems = []
    for width in WIDTHS:
        context = browser.new_context(base_url=live_server.url, bypass_csp=True,
                                      viewport={"width": width, "height": WIDTHS[width]})
        try:
            _login(context, live_server.url, "alice")
            record = _check_page(context.new_page(), "/cluster/", width, "alice", AXE, set())
            problems += [f"at {width} px: {v['impact']} {v['rule']} on {v['targets'][:3]}"
                         for v in record["violations"] if v["impact"] in FAILING]
            if width == NARROW and record["overflow"]:
                problems.append(f"at {width} px overflows: {record['overflow']}")
            page = context.new_page()
            page.goto("/cluster/")
            assert "stale" in page.locator('[data-cluster="cluster-b"]').inner_text()
        finally:
            context.close()
    assert not problems, "\n".join(problems)
