from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.cluster.models import Partition
from portal.core.errors import InvalidInput
from portal.projects.selectors import projects_outlook
from portal.projects.serializers import ProjectOutlookSerializer


class ProjectListApi(APIView):
    @extend_schema(responses=ProjectOutlookSerializer(many=True),
                   parameters=[OpenApiParameter("partition", str, description="Count pending jobs there; "
                                                "default: the cluster's default partition")],
                   summary="Your projects, with their GPU-hour budgets as of the last poll cycle",
                   description="Submit a job under one with its `account`. Used and left come from "
                               "Slurm's own accounting (`sshare` GrpTRESMins/GrpTRESRaw), read once per "
                               "poll cycle. `sooner` marks the project under which a job would likely "
                               "start sooner: a used-up budget holds jobs, then the higher fair share "
                               "ranks higher, then fewer jobs pending under the account; all from the "
                               "portal's database, never Slurm.")
    def get(self, request: Request) -> Response:
        partitions = list(Partition.objects.order_by("-is_default", "name").values_list("name", flat=True))
        partition = request.query_params.get("partition", "")
        if partition and partition not in partitions:
            raise InvalidInput({"partition": [f"No partition {partition!r}; GET /api/v1/policy/ has them."]})
        partition = partition or next(iter(partitions), "")
        outlooks = projects_outlook(user=request.user, partition=partition, today=timezone.localdate())
        return Response(ProjectOutlookSerializer(outlooks, many=True).data)
