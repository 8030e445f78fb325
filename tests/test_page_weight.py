"""What a page ships besides its HTML: the CSS and JS it links, compressed, at most 150 KB (#34), the
chart library (Vega, on chart pages only) aside. Read from the static files the pages name."""

import gzip
import re
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db
BUDGET = 150 * 1024
CHART_LIBRARY = re.compile(r"^vendor/vega")
PAGES = ("/", "/servers/", "/jobs/", "/apps/", "/cluster/", "/usage/", "/usage/efficiency/", "/benchmarks/",
         "/accounts/profile/")


def _shipped(html: str) -> list[str]:
    return [path for path in re.findall(r'(?:src|href)="/static/([^"?]+\.(?:js|css))"', html)
            if not CHART_LIBRARY.match(path)]


@pytest.mark.parametrize("path", PAGES)
def test_a_page_ships_at_most_150_kb_of_css_and_js(client, path):
    client.force_login(UserFactory(username="alice"))
    response = client.get(path)
    assert response.status_code == 200, path
    files = _shipped(response.content.decode())
    assert "core/portal.css" in files and "core/nav.js" in files, files
    sizes = {name: len(gzip.compress(Path(finders.find(name)).read_bytes())) for name in set(files)}
    assert sum(sizes.values()) <= BUDGET, sizes
