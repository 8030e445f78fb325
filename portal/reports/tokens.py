"""The report tokens as this app uses them; minted and read in portal.core.report_tokens, where the
lower apps (jobs, servers) can reach them too."""

from portal.core.report_tokens import KINDS, ReportKind, report_token, report_token_read

__all__ = ["KINDS", "ReportKind", "report_token", "report_token_read"]
