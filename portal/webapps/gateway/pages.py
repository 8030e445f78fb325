"""The gateway's own pages: tiny, static HTML with nothing to run (CSP default-src 'none')."""

from html import escape

from django.conf import settings

HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": "default-src 'none'",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def apps_page_url() -> str:
    return settings.PORTAL_URL.rstrip("/") + "/apps/"


def render(title: str, message: str, *, refresh: int | None = None) -> str:
    # A meta refresh is markup, not script: the CSP leaves it working (a starting app's page
    # reloads itself until the app answers).
    meta = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{meta}'
        f"<title>{escape(title)}</title></head><body><h1>{escape(title)}</h1>"
        f"<p>{escape(message)}</p>"
        f'<p><a href="{escape(apps_page_url())}">Your apps in the portal</a></p></body></html>'
    )
