from django.apps import AppConfig


class ReportsConfig(AppConfig):
    """Jobs and sessions reporting their own transitions: above jobs and servers, so neither
    imports it (they mint tokens with portal.core.report_tokens)."""

    name = "portal.reports"
