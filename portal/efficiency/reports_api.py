"""GET /api/v1/usage/efficiency/ (the report, as /usage/efficiency/ shows it) and, for admins,
GET /api/v1/usage/efficiency/wasteful/ (the week's most wasteful users)."""

from dataclasses import asdict

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import Forbidden
from portal.efficiency.reports import (
    WASTEFUL_SPAN,
    ReportQuery,
    efficiency_report,
    report_range,
    wasteful_until,
    wasteful_users,
)
from portal.efficiency.reports_serializers import ReportInputSerializer, ReportSerializer, WastefulSerializer


class EfficiencyReportApi(APIView):
    @extend_schema(parameters=[ReportInputSerializer], responses={200: ReportSerializer},
                   summary="CPU-, memory- and GPU-hours allocated against used and wasted, per user or group",
                   description="Yours; admins: everybody's, or one `user`'s. Over the batch jobs and "
                               "notebook sessions that ended in [since, until) (default: the last 4 weeks). "
                               "Wasted: allocated - used, over the records whose use is known; `*_unknown` "
                               "counts the others. By group, a user counts in each of their groups. "
                               "From the database.")
    def get(self, request: Request) -> Response:
        data = ReportInputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        query = ReportQuery(group_by=values["group_by"], since=values.get("since"), until=values.get("until"),
                            username=values.get("user"))
        since, until = report_range(query)
        rows = efficiency_report(user=request.user, query=ReportQuery(
            group_by=query.group_by, since=since, until=until, username=query.username))
        return Response(ReportSerializer({"since": since, "until": until, "group_by": query.group_by,
                                          "rows": rows}).data)


class WastefulUsersApi(APIView):
    @extend_schema(responses={200: WastefulSerializer, 403: OpenApiResponse(description="Admins only")},
                   summary="Admins: the 10 users who wasted most in the last 7 days, with their worst runs",
                   description="Ranked by wasted GPU-hours, then CPU-hours (allocated - used, over the jobs "
                               "and sessions whose use is known), each with their 3 worst jobs or sessions.")
    def get(self, request: Request) -> Response:
        if not request.user.is_staff:
            raise Forbidden("Only portal admins may see other users' waste.")
        until = wasteful_until()
        users = [asdict(user) for user in wasteful_users(now=until)]
        return Response(WastefulSerializer({"since": until - WASTEFUL_SPAN, "until": until,
                                            "users": users}).data)
