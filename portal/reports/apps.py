from django.apps import AppConfig


class ReportsConfig(AppConfig):
    """Jobs and sessions reporting their own transitions: above jobs and servers, so neither
    imports it (they mint tokens with portal.tokens.report)."""

    name = "portal.reports"
