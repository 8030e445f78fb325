"""REST: usage per user or group, and its GPU efficiency, as /usage/ shows them."""

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.usage.gpu_efficiency import gpu_efficiency_rows
from portal.usage.selectors import UsageQuery, usage_range, usage_rows
from portal.usage.serializers import GpuEfficiencySerializer, UsageInputSerializer, UsageSerializer


class UsageApi(APIView):
    @extend_schema(
        parameters=[UsageInputSerializer],
        responses=UsageSerializer,
        summary="Jobs, GPU-hours, success rate and time in queue per user or group, by week "
        "or month (yours; admins: everybody's)",
    )
    def get(self, request: Request) -> Response:
        data = UsageInputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        query = UsageQuery(
            period=values["period"],
            group_by=values["group_by"],
            since=values.get("since"),
            until=values.get("until"),
            username=values.get("user"),
        )
        rows = usage_rows(user=request.user, query=query)
        body = {
            "period": query.period,
            "group_by": query.group_by,
            "rows": rows,
            "metrics_url": "/api/v1/jobs/{id}/metrics/",
        }
        return Response(UsageSerializer(body).data)


class GpuEfficiencyApi(APIView):
    @extend_schema(parameters=[UsageInputSerializer], responses={200: GpuEfficiencySerializer},
                   summary="GPU efficiency per user or group: allocated against busy GPU-hours",
                   description="As /usage/ shows it (yours; admins: everybody's, or one `user`'s), for the "
                               "jobs submitted and the sessions asked for in [since, until) (default: the "
                               "last 12 weeks, or year with period=month). Busy GPU-hours: allocated "
                               "GPU-hours x the mean utilisation of all the samples a job or session sent; "
                               "efficiency: busy / sampled GPU-hours. From the database.")
    def get(self, request: Request) -> Response:
        data = UsageInputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        query = UsageQuery(period=values["period"], group_by=values["group_by"], since=values.get("since"),
                           until=values.get("until"), username=values.get("user"))
        since, until = usage_range(query)
        rows = gpu_efficiency_rows(user=request.user, since=since, until=until, group_by=query.group_by,
                                   username=query.username)
        return Response(GpuEfficiencySerializer(
            {"since": since, "until": until, "group_by": query.group_by, "rows": rows}).data)
