"""Going to a page as a person does: through the header's menus (on a phone, behind Menu first)."""


def go(page, link_id: str) -> None:
    """Open the menu holding the link with this id, and follow it."""
    page.locator(f"#{link_id}").wait_for(state="attached")  # the page with the menus has loaded
    toggle = page.locator(".menu-toggle")
    if toggle.is_visible() and toggle.get_attribute("aria-expanded") != "true":
        toggle.click()
    menu = page.locator(f"details.menu:has(#{link_id})")
    if menu.get_attribute("open") is None:
        menu.locator("summary").click()
    page.click(f"#{link_id}")
