"""Issuing scrape tokens (writes). Checking one is in portal.metrics.selectors."""

import secrets

from portal.accounts.models import User
from portal.core.errors import InvalidInput
from portal.metrics.models import ScrapeToken


def scrape_token_create(*, name: str, created_by: User | None = None) -> tuple[ScrapeToken, str]:
    """A new token; returns it with the plain key, which is never stored."""
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidInput({"name": ["A name of 1 to 100 characters is required."]})
    key = secrets.token_urlsafe(32)
    token = ScrapeToken.objects.create(name=name, digest=ScrapeToken.digest_of(key), prefix=key[:8],
                                       created_by=created_by)
    return token, key
