"""GPU-hours on the job pages read as a person reads them (#21: a 2-second job showed 0.0005555555555555556);
the API keeps the exact figure."""

import pytest

from portal.core.templatetags.units import gpu_hours
from tests.factories import JobFactory


@pytest.mark.parametrize(("value", "shown"), [
    (None, "—"), (0.0, "0"), (2 / 3600, "< 0.01"), (0.01, "0.01"), (0.5, "0.50"), (1234.567, "1,234.57"),
])
def test_gpu_hours_filter(value, shown):
    assert gpu_hours(value) == shown


@pytest.mark.django_db
def test_a_two_second_job_page_and_list_say_less_than_a_hundredth(client):
    job = JobFactory(gpu_hours=2 / 3600)
    client.force_login(job.user)
    for page in (f"/jobs/{job.pk}/", "/jobs/"):
        html = client.get(page).content.decode()
        assert "&lt; 0.01" in html and "0.000555" not in html
    assert client.get(f"/api/v1/jobs/{job.pk}/").json()["gpu_hours"] == pytest.approx(2 / 3600)
