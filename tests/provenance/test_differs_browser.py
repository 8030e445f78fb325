"""The What-differs page, and the parts issue 36 adds to a job's page (the picker) and a session's
card (its provenance), in headless Chromium at a desktop's and a phone's width: axe-core (WCAG 2.0
and 2.1, A and AA) finds no serious or critical violation, and nothing overflows at 390 px (a table
scrolls inside itself); the job page's picker leads there."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.accounts.models import User
from portal.jobs.models import JobMetric
from portal.provenance.models import Provenance
from tests.browser.test_accessibility_browser import AXE, FAILING, NARROW, WIDTHS, _check_page, _login
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def _run(user, accuracy, sha256="f" * 64):
    lock = ["numpy==2.1.0", "torch==2.14.1", *(f"pkg-{i}==1.{i}" for i in range(30))]
    now = timezone.now()
    job = JobFactory(user=user, template="pytorch-train", started_at=now - timedelta(minutes=3), ended_at=now,
                     node_list="node-with-a-long-name-01")
    Provenance.objects.create(
        job=job, template="pytorch-train", parameters={"seed": 1, "entrypoint": "proj/train.py"},
        script=f"#!/bin/bash\n#SBATCH --output=/home/alice/gpuportal/jobs/job-{job.uuid}.out\nrun\n",
        resources={"nodes": 1, "gpus_per_node": 1}, image_reference="127.0.0.1:5000/gpuportal/pytorch:24.08",
        image_digest="sha256:" + "e" * 64, environment="pytorch", environment_hash="a" * 64,
        environment_lock="\n".join(lock),
        capture_state=Provenance.Capture.DONE,
        captured={"code": [{"path": "/home/alice/proj", "commit": "c" * 40, "remote": "", "diff": "+x\n"}],
                  "inputs": [{"path": "proj/a-rather-long-folder-name/with/a/deep/data-file.bin",
                              "kind": "file", "size": 1048576, "mtime": 1, "sha256": sha256}],
                  "gpu": {"model": "none", "driver": "none"}})
    if accuracy is not None:
        JobMetric.objects.create(job=job, run="", tag="accuracy", steps=[0, 1, 2],
                                 values=[0.5, 0.8, accuracy], final_step=2, final_value=accuracy)
    return job


def test_the_what_differs_page_passes_axe_and_fits_a_phone(live_server, browser):
    problems = []
    for width in WIDTHS:
        context = browser.new_context(base_url=live_server.url, bypass_csp=True,
                                      viewport={"width": width, "height": WIDTHS[width]})
        try:
            _login(context, live_server.url, "alice")
            alice = User.objects.get(username="alice")
            if width == max(WIDTHS):
                this, other = _run(alice, 0.98), _run(alice, 0.97, sha256="0" * 64)
                SessionFactory(user=alice, name="lab", environment="pytorch")
                # Its page has the picker; without metrics, as the jobs app's own chart (not issue 36's)
                # is wider than a phone.
                bare = _run(alice, None)
                page = context.new_page()
                page.goto(f"/jobs/{this.pk}/")
                page.select_option("#differs-other", str(other.pk))
                page.click("#differs-button")
                page.wait_for_url(f"**/jobs/{this.pk}/differs/{other.pk}/")
                assert "What made the runs differs: inputs." in page.inner_text("#differs-verdict")
            for path in (f"/jobs/{this.pk}/differs/{other.pk}/", f"/jobs/{bare.pk}/", "/servers/"):
                record = _check_page(context.new_page(), path, width, "alice", AXE, set())
                problems += [f"{path} at {width} px: {v['impact']} {v['rule']} on {v['targets'][:3]}"
                             for v in record["violations"] if v["impact"] in FAILING]
                if width == NARROW and record["overflow"]:
                    problems.append(f"{path} at {width} px overflows: {record['overflow']}")
        finally:
            context.close()
    assert not problems, "\n".join(problems)
