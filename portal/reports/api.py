from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.parsers import BoundedJSONParser
from portal.core.schema import ErrorSerializer
from portal.reports.authentication import HasReportToken, ReportTokenAuthentication
from portal.reports.serializers import ReportResultSerializer, ReportSerializer
from portal.reports.services import Report, report_apply


class ReportApi(APIView):
    authentication_classes = [ReportTokenAuthentication]
    permission_classes = [HasReportToken]
    parser_classes = [BoundedJSONParser]  # what report.sh sends; no forms

    @extend_schema(
        request=ReportSerializer,
        responses={202: ReportResultSerializer,
                   401: OpenApiResponse(ErrorSerializer, description="No report token, or not a valid one")},
        summary="A job or a session's job reports its own transition (started, ready, exited; queued from "
                "a session's spawner)",
        description="Sent by the job script itself (templates/jobs/_common/report.sh) with its own "
                    "token, `Authorization: Report <token>`; `queued` by the hub's spawner with the "
                    "session's token while its job waits. Idempotent: a repeat or a late report "
                    "answers `applied: false` and changes nothing.",
    )
    def post(self, request: Request) -> Response:
        serializer = ReportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        grant = request.auth
        applied = report_apply(kind=grant.kind, pk=grant.pk, report=Report(**serializer.validated_data))
        return Response(ReportResultSerializer({"applied": applied}).data, status=status.HTTP_202_ACCEPTED)
