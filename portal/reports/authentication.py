"""`Authorization: Report <token>`: a job or a session's job, reporting about itself. The token names
one object (portal.core.report_tokens); it is nobody's login and grants nothing else."""

from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions
from rest_framework.request import Request
from rest_framework.views import APIView

from portal.core.errors import NotAuthenticated
from portal.core.report_tokens import ReportKind, report_token_read


@dataclass(frozen=True)
class ReportGrant:
    """What a valid report token allows: reports about this one object."""

    kind: ReportKind
    pk: int


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
