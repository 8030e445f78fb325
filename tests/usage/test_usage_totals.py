"""/usage/'s GPU-hour figures each say what they count, and one line ties the table by period (batch
jobs, Slurm's accounting of the ended ones) to the efficiency table (jobs and notebook sessions)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from portal.usage.gpu_efficiency import gpu_allocated_total
from tests.factories import UserFactory
from tests.usage.test_gpu_efficiency import planted  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def users(request):
    """alice and bob with the GPU work tests/gpus/test_efficiency.py plants (its figures known)."""
    return request.getfixturevalue("planted")


def _text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


def _total_line(page: str) -> str:
    return _text(re.search(r'<p class="notice" id="gpu-hours-total">(.*?)</p>', page, re.DOTALL)[1])


def _column(page: str, table: str, index: int) -> list[float]:
    body = re.search(rf'<table[^>]* id="{table}"[^>]*>(.*?)</table>', page, re.DOTALL)[1]
    return [float(re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)[index])
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.DOTALL) if "<td" in row]


def test_each_figure_says_what_it_counts_and_the_total_reconciles_the_tables(client, users):
    alice, _ = users
    client.force_login(alice)
    page = client.get("/usage/").content.decode()
    # alice: ended jobs 4 + 2 + 0 GPU-h (the CPU job), a 1-GPU session of an hour, nothing running.
    assert _total_line(page) == (
        "Total allocated: 7.00 GPU-h = 6.00 in batch jobs + 1.00 in notebook sessions. "
        "Batch jobs: 6.00 GPU-h in ended jobs (the table by week below) + 0.00 GPU-h in jobs still running, "
        "up to now. Notebook sessions are only in the GPU efficiency table.")
    assert sum(_column(page, "usage", 6)) == pytest.approx(6.0)  # the table by week: batch jobs only
    assert sum(_column(page, "gpu-efficiency", 3)) == pytest.approx(7.0)  # jobs and sessions
    assert "Batch jobs by week" in page and "GPU-hours per period, batch jobs only" in page
    assert "<th>GPU-hours (batch jobs)</th>" in page
    assert "Batch jobs only, by the week they were submitted" in page
    assert "GPU efficiency: batch jobs and notebook sessions" in page
    assert "<th>Allocated GPU-hours (jobs and sessions)</th>" in page
    assert "<th>GPU-hours reclaimed (time left, not used)</th>" in page


def test_a_running_job_is_in_the_total_and_not_yet_in_the_table_by_period(client, users):
    _, bob = users  # 4 GPUs for 30 minutes so far
    client.force_login(bob)
    page = client.get("/usage/").content.decode()
    line = _total_line(page)
    assert re.fullmatch(r"Total allocated: 2\.0\d GPU-h = 2\.0\d in batch jobs "
                        r"\+ 0\.00 in notebook sessions\. "
                        r"Batch jobs: 0\.00 GPU-h in ended jobs \(the table by week below\) "
                        r"\+ 2\.0\d GPU-h in jobs still running, up to now\. .*", line), line
    assert _column(page, "usage", 6) == [0.0]


def test_by_group_the_total_counts_each_user_once(client, users):
    client.force_login(UserFactory(username="root", is_staff=True))
    page = client.get("/usage/?group_by=group").content.decode()
    line = _total_line(page)
    assert "(the table by week below, where a user's hours count in each of their groups)" in line
    total = gpu_allocated_total(user=UserFactory(username="root"), since=timezone.now() - timedelta(weeks=12),
                                until=timezone.now())
    assert (total.jobs_ended, total.sessions) == (6.0, 1.0)
    assert total.jobs_running == pytest.approx(2.0, abs=0.02)
    assert total.allocated == pytest.approx(total.jobs_ended + total.jobs_running + total.sessions)
    assert f"Total allocated: {total.allocated:.2f} GPU-h" in line
    # bob (groups ml and vision) has the only running job: it is in both groups' rows, once in the total.
    rows = sum(_column(page, "gpu-efficiency", 3))
    assert rows == pytest.approx(total.allocated + total.jobs_running, abs=0.03)


def test_a_refused_period_has_no_total(client, users):
    client.force_login(users[0])
    page = client.get("/usage/?from=2026-02-01&to=2026-01-01").content.decode()
    assert "Must be before" in page and 'id="gpu-hours-total"' not in page
