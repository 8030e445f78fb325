"""A person in headless Chromium: log in as a demo user, see the cluster's GPUs."""

from pathlib import Path

import pytest

from portal.cluster.models import Partition
from tests.cluster.shape import gpu_nodes
from tests.poll_helpers import slurm_poll

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


def _login(page, live_server, username, password):
    page.goto(f"{live_server.url}/cluster/")  # the login page, then back to the cluster's status
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")


def test_alice_sees_the_free_gpus_of_every_node_in_partition_gpu(page, live_server, slurm):
    total = sum(gpu_nodes().values())  # every node's GPUs, as Slurm counts them
    slurm_poll(slurm=slurm)
    # Other tests share the cluster: what is free is what the poll just stored.
    free = Partition.objects.get(name="gpu").gpus.get(gpu_type="a100").free
    _login(page, live_server, "alice", "alice-pw")
    card = page.locator('[data-partition="gpu"]')
    assert card.locator("[data-gpus-free]").inner_text() == str(free)
    assert f"{free} of {total} A100 GPUs free" in card.inner_text()
    assert page.locator('[data-partition="debug"]').is_visible()
    assert page.locator("#admin-link").count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "cluster.png", full_page=True)


def test_admin_sees_admin_link(page, live_server, slurm):
    slurm_poll(slurm=slurm)
    _login(page, live_server, "ada", "ada-pw")
    assert page.locator("#admin-link").count() == 1


@pytest.mark.parametrize(("username", "password", "message"), [
    ("eve", "eve-pw", "not allowed to use this portal"),
    ("alice", "nope", "Wrong username or password"),
])
def test_refusals_are_explained(page, live_server, username, password, message):
    _login(page, live_server, username, password)
    assert message in page.locator("[role=alert]").inner_text()
