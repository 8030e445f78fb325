"""The documentation's five-minute tour, taken in headless Chromium on the real stack: alice logs in,
starts a 1-GPU session, runs a template notebook's cell in JupyterLab, submits a job that writes
TensorBoard events, reads its metrics on its page, and opens TensorBoard on its logs as a web app.
Each step's screenshot replaces docs/assets/tour/<name>.png, which docs/getting-started.md shows, so
the tour's pictures are never older than the last `make test`."""

import re
import time

import pytest

from portal.environments.services import environment_check, environments_discover
from portal.jobs.models import Job, JobState
from portal.webapps.models import App, AppState
from tests.docs.conftest import ROOT
from tests.environments.conftest import REAL_ROOT
from tests.hub import wait_for
from tests.jobs.conftest import polled  # noqa: F401 (a fixture)
from tests.notebook_templates import cluster_notebook
from tests.webapps.test_apps_browser import READY_TIMEOUT, _open, apps_bed  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("polled")]
SHOTS = ROOT / "docs" / "assets" / "tour"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
# The script of the tour's job: 30 steps of a made-up loss as TensorBoard events, in the job's
# TENSORBOARD_LOGDIR (the environment's tensorboard writes them; no framework needed).
TRAIN = """python3 - <<'PY'
import math, os, time
from tensorboard.summary import Writer
writer = Writer(os.path.join(os.environ["TENSORBOARD_LOGDIR"], "tour"))
for step in range(30):
    loss = 2.0 * math.exp(-step / 8) + 0.05
    writer.add_scalar("train/loss", loss, step)
    writer.add_scalar("train/accuracy", 1 - loss / 2.2, step)
    print(f"step {step} loss {loss:.4f}", flush=True)
    time.sleep(0.1)
writer.close()
PY"""


@pytest.fixture
def real_environment(settings):
    """A real framework environment (each has tensorboard), registered in the test database."""
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    found = [env for env in environments_discover() if env.name in ("pytorch", "jax", "tensorflow")]
    if not found:
        pytest.skip("no framework environments built (scripts/envs/build.sh)")
    environment = sorted(found, key=lambda env: env.name != "jax")[0]  # JAX's is the lightest
    environment_check(environment=environment)
    assert environment.healthy, environment.health_message
    return environment


def _shot(page, name: str, **kwargs) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{name}.png", **kwargs)


def _shot_phone(page, name: str) -> None:
    """The same page on a phone (390 x 844), as <name>-phone.png."""
    page.set_viewport_size(PHONE)
    try:
        _shot(page, f"{name}-phone", full_page=True)
    finally:
        page.set_viewport_size(DESKTOP)


def _menu_open(page, link_id: str) -> None:
    if page.locator(".menu-toggle").is_visible():
        page.click(".menu-toggle")
    page.click(f"details.menu:has(#{link_id}) summary")


def test_the_tour_and_its_screenshots(request, portal_hub, real_environment, browser, page):
    base = request.getfixturevalue("apps_bed")["portal"]
    page.set_viewport_size(DESKTOP)

    # 1. Log in; the cluster's status.
    page.goto(f"{base}/accounts/login/")
    _shot(page, "login")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    page.goto(f"{base}/cluster/")
    assert page.locator("#help-link").get_attribute("href") == "/docs/user/cluster/"
    _shot(page, "cluster")

    # 2. Start a session: a card that becomes ready with its node and time left.
    page.goto(f"{base}/servers/")
    page.fill("#id_name", "tour")
    page.select_option("#id_partition", "gpu")
    page.fill("#id_gpus", "1")
    page.fill("#id_hours", "1")
    page.click("#start")
    page.locator("#open-tour").wait_for(timeout=120000)
    _shot(page, "session")

    # 3. Run a template: JupyterLab through the portal, a template notebook's cell on the GPU.
    with page.context.expect_page() as opened:
        page.click("#open-tour")
    lab = opened.value
    lab.set_default_timeout(60000)
    lab.set_viewport_size({"width": 1280, "height": 800})
    lab.locator("#jp-main-dock-panel").wait_for()
    lab_url = lab.url.split("/lab")[0] + "/lab"
    notebook = cluster_notebook()
    lab.goto(f"{lab_url}/tree/templates/{notebook.name}?reset")
    cells = lab.locator(".jp-Notebook .jp-CodeCell")
    cells.first.wait_for()
    lab.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=120000)
    cell = cells.nth(notebook.code_cell_with('"CUDA_VISIBLE_DEVICES"'))
    cell.locator(".cm-content").click()
    lab.keyboard.press("Shift+Enter")
    cell.locator(".jp-OutputArea-output").wait_for()
    assert "SLURM_JOB_ID" in cell.locator(".jp-OutputArea-output").inner_text()
    _shot(lab, "jupyterlab")
    lab.close()

    # 4. Submit a job: the custom template in the environment, previewed, then submitted.
    page.goto(f"{base}/jobs/new/custom/")
    page.fill("#id_name", "tour training")
    page.select_option("#id_partition", "debug")
    page.fill("#id_time_limit", "10")
    page.fill("#id_gpus", "0")
    page.select_option("#id_environment", real_environment.name)
    page.fill("#id_commands", TRAIN)
    page.click("#preview-button")
    page.locator("#script-preview").wait_for()
    _shot(page, "job-new", full_page=True)
    page.click("#submit-button")
    page.wait_for_selector("#stdout")
    job = Job.objects.get(name="tour training")
    wait_for(lambda: Job.objects.get(pk=job.pk).state in (JobState.COMPLETED, JobState.FAILED), 180,
             "the tour's job to end", interval=1)
    job.refresh_from_db()
    assert job.state == JobState.COMPLETED, job.state

    # 5. Its metrics, recorded when it ended, on its page.
    wait_for(lambda: job.metrics.exists(), 30, "the job's metrics")
    page.goto(f"{base}/jobs/{job.pk}/")
    page.wait_for_function("() => document.getElementById('stdout').textContent.includes('step 29')",
                           timeout=30000)
    _shot(page, "job", full_page=True)
    _shot_phone(page, "job")
    page.locator("#metrics-chart canvas, #metrics-chart svg").first.wait_for(timeout=30000)
    page.locator("#metrics").screenshot(path=SHOTS / "metrics.png")

    # 6. TensorBoard on the job's logs, from its page: a web app of alice's on its own origin.
    clicked = time.monotonic()
    page.click("#tensorboard-button")
    page.wait_for_url(lambda url: "/apps/" in url)
    board = App.objects.filter(user__username="alice").latest("pk")
    page.wait_for_selector(f"#app-open-{board.pk}, .app-card[data-state=ended]", timeout=READY_TIMEOUT * 1000)
    board.refresh_from_db()
    assert board.state == AppState.READY, board.reason
    print(f"TensorBoard: click -> ready {time.monotonic() - clicked:.1f} s")
    page.goto(f"{base}/apps/")
    _shot(page, "apps")
    _open(page, board)
    page.get_by_text("train/loss").first.wait_for(timeout=60000)
    page.wait_for_timeout(2000)  # its charts draw
    _shot(page, "tensorboard")

    # 7. Home: what runs (the session, the app), what waits, what needs alice, quick starts, her runs;
    # then the header's Compute menu open, on a desktop and behind Menu on a phone.
    page.goto(f"{base}/")
    _shot(page, "home", full_page=True)
    _shot_phone(page, "home")
    _menu_open(page, "jobs-link")
    _shot(page, "menu")
    page.set_viewport_size(PHONE)
    page.reload()
    _menu_open(page, "jobs-link")
    _shot(page, "menu-phone", full_page=True)
    page.set_viewport_size(DESKTOP)

    for name in ("login", "cluster", "session", "jupyterlab", "job-new", "job", "job-phone", "metrics",
                 "apps", "tensorboard", "home", "home-phone", "menu", "menu-phone"):
        assert (SHOTS / f"{name}.png").stat().st_size > 5000, name


def test_the_job_page_with_its_efficiency(live_server, page):
    """docs/user/efficiency.md's picture: the issue's job (4 CPUs, 16 GB, 2 GPUs and 1 h asked; 1 CPU,
    ~200 MB and no busy GPU used), with the record the poll cycle writes when a job has ended."""
    from datetime import timedelta

    from django.utils import timezone

    from portal.accounts.models import User
    from tests.efficiency.records import wasteful_job_record
    from tests.factories import JobFactory

    page.set_viewport_size(DESKTOP)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", "alice-pw")
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    ended = timezone.now()
    job = JobFactory(user=User.objects.get(username="alice"), name="train-resnet", state=JobState.COMPLETED,
                     gpus_per_node=2, cpus_per_node=4, mem_mb_per_node=16 * 1024,
                     time_limit=timedelta(hours=1), started_at=ended - timedelta(minutes=20), ended_at=ended,
                     elapsed=timedelta(minutes=20))
    wasteful_job_record(job)
    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    assert page.locator("#efficiency meter").count() == 4
    assert page.locator("#efficiency-advice li").count() == 4
    # The page from its Efficiency heading to the end of the card, in page coordinates.
    box = page.evaluate("""() => {
      const top = document.getElementById('efficiency-heading').getBoundingClientRect().top + scrollY;
      const bottom = document.getElementById('efficiency').getBoundingClientRect().bottom + scrollY;
      return {x: 0, y: top - 16, width: innerWidth, height: bottom - top + 32};
    }""")
    _shot(page, "job-efficiency", clip=box, full_page=True)
    assert (SHOTS / "job-efficiency.png").stat().st_size > 5000
