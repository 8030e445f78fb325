"""Scrape tokens: what a Prometheus server presents at /metrics (`Authorization: Bearer <key>`)."""

import hashlib

from django.conf import settings
from django.db import models


class ScrapeToken(models.Model):
    """Set by an admin (the admin site or `manage.py metrics_scrape_token`). Only a SHA-256 digest of
    the key is stored; the key is shown once. It reads /metrics and nothing else, until it expires
(METRICS_SCRAPE_TOKEN_DAYS after its creation unless the admin sets another date or none)."""

    name = models.CharField(max_length=100, help_text="Who scrapes with it, e.g. the Prometheus host")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=8, editable=False, help_text="First characters of the key")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   blank=True, editable=False, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @staticmethod
    def digest_of(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()
