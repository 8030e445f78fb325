"""Issuing scrape tokens (writes). Checking one is in portal.metrics.selectors."""

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from portal.accounts.models import User
from portal.core.errors import InvalidInput
from portal.metrics.models import ScrapeToken


def scrape_token_expiry() -> datetime | None:
    """When a new token expires unless its creator says otherwise (None: METRICS_SCRAPE_TOKEN_DAYS 0)."""
    days = settings.METRICS_SCRAPE_TOKEN_DAYS
    return timezone.now() + timedelta(days=days) if days else None


def scrape_token_create(*, name: str, created_by: User | None = None,
                        expires_at: datetime | None = None) -> tuple[ScrapeToken, str]:
    """A new token; returns it with the plain key, which is never stored."""
    name = name.strip()
    if not name or len(name) > 100:
        raise InvalidInput({"name": ["A name of 1 to 100 characters is required."]})
    if expires_at is not None and expires_at <= timezone.now():
        raise InvalidInput({"expires_at": ["An expiry in the future, or none."]})
    key = secrets.token_urlsafe(32)
    token = ScrapeToken.objects.create(name=name, digest=ScrapeToken.digest_of(key), prefix=key[:8],
                                       created_by=created_by, expires_at=expires_at)
    return token, key
