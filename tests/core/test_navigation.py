"""The header's menus (portal.core.navigation): one link is the current page, the longest that covers
the path, and its menu with it."""

import pytest

from portal.core.navigation import menus


def _current(path: str, is_staff: bool = False) -> list[tuple[str, str]]:
    return [(group.label, link.label)
            for group in menus(path, is_staff) for link in group.links if link.current]


@pytest.mark.parametrize(("path", "current"), [
    ("/usage/", [("Account", "Usage and budgets")]),
    ("/usage/efficiency/", [("Account", "Efficiency")]),  # not Usage and budgets as well
    ("/jobs/12/", [("Compute", "Batch jobs")]),
    ("/", []),
])
def test_one_link_is_current(path, current):
    assert _current(path) == current


def test_staff_links_are_current_only_for_staff():
    assert _current("/activity/all/", is_staff=True) == [("Admin", "Audit trail")]
    assert ("Admin", "Audit trail") not in _current("/activity/all/")
