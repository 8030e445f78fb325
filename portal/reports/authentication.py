"""`Authorization: Report <token>`: a job or a session's job, reporting about itself. The token names
one object (portal.tokens.report); it is nobody's login and grants nothing else, and nothing at
all once its object has ended more than REPORT_TOKEN_GRACE_MINUTES ago: a token copied
out of a finished job cannot keep feeding figures to the idle-GPU judge or anything else."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.views import APIView

from portal.core.errors import NotAuthenticated
from portal.jobs.models import Job
from portal.sessions.models import Session
from portal.tokens.report import ReportKind, report_token_read
from portal.webapps.models import App

_MODELS = {"job": Job, "session": Session, "app": App}


@dataclass(frozen=True)
class ReportGrant:
    """What a valid report token allows: reports about this one object."""

    kind: ReportKind
    pk: int

    @property
    def throttle_id(self) -> str:
        """Who portal.core.throttling counts these reports for: the object, not an (anonymous) user."""
        return f"{self.kind}-{self.pk}"


def report_grant_expired(kind: ReportKind, pk: int) -> bool:
    """Its object ended more than the grace ago (late reports and last samples fit in the grace). A
    token of an object that is gone is not refused here: its reports apply to nothing."""
    ended = _MODELS[kind].objects.filter(pk=pk).values_list("ended_at", flat=True).first()
    cutoff = timezone.now() - timedelta(minutes=settings.REPORT_TOKEN_GRACE_MINUTES)
    return ended is not None and ended < cutoff


class ReportTokenAuthentication(authentication.BaseAuthentication):
    keyword = b"report"

    def authenticate(self, request: Request) -> tuple[AnonymousUser, ReportGrant] | None:
        parts = authentication.get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        try:
            kind, pk = report_token_read(parts[1].decode("ascii"))
        except (UnicodeDecodeError, NotAuthenticated) as error:
            raise exceptions.AuthenticationFailed("Invalid report token.",
                                                  code="invalid_report_token") from error
        if report_grant_expired(kind, pk):
            raise exceptions.AuthenticationFailed("This report token expired: its job ended.",
                                                  code="expired_report_token")
        return AnonymousUser(), ReportGrant(kind=kind, pk=pk)

    def authenticate_header(self, request: Request) -> str:
        return "Report"


class HasReportToken(permissions.BasePermission):
    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.auth, ReportGrant)


class ReportTokenScheme(OpenApiAuthenticationExtension):
    target_class = ReportTokenAuthentication
    name = "reportAuth"

    def get_security_definition(self, auto_schema: object) -> dict:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Report <token>`: a job's or a session's own token, which the portal puts "
                           "in its environment (GPUPORTAL_REPORT_TOKEN); not a user's token.",
        }
