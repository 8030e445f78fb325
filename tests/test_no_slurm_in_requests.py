"""The suite-wide guard (tests/conftest.py) itself: an sbatch or sacct inside a request fails the
test; one in a Celery task the request queued does not (a worker runs it in production)."""

import pytest
from celery import shared_task
from django.test import Client

from slurm.runner import SlurmRunner


@pytest.fixture
def fake_bin(tmp_path):
    """A runner whose sbatch and sacct are /bin/true: nothing reaches Slurm."""
    for name in ("sbatch", "sacct"):
        (tmp_path / name).symlink_to("/bin/true")
    return SlurmRunner(bin_dir=tmp_path)


@shared_task
def _sacct(bin_dir: str) -> None:
    SlurmRunner(bin_dir=bin_dir).run_bytes("sacct", ["--noheader"])


@pytest.fixture
def page(monkeypatch, user):
    """Runs `body` as the apps page's query, inside a request of the test client."""
    client = Client()
    client.force_login(user)

    def open_with(body):
        monkeypatch.setattr("portal.webapps.views.app_list", lambda **kwargs: body() or [])
        return client.get("/apps/")

    return open_with


def test_an_sbatch_inside_a_request_fails_the_test(page, fake_bin, no_sbatch_or_sacct_in_requests):
    with pytest.raises(AssertionError, match="sbatch ran inside a web request"):
        page(lambda: fake_bin.run_bytes("sbatch", ["--parsable"]))
    assert no_sbatch_or_sacct_in_requests == ["sbatch --parsable"]
    no_sbatch_or_sacct_in_requests.clear()  # seen, as it should be: this test passes


def test_a_task_the_request_queued_may_run_sacct(page, fake_bin, no_sbatch_or_sacct_in_requests):
    # Eager in tests, so it runs inside the request here; in production a worker runs it.
    assert page(lambda: _sacct.delay(str(fake_bin.bin_dir)) and None).status_code == 200
    assert no_sbatch_or_sacct_in_requests == []
