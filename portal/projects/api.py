from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.projects.selectors import project_budget, user_projects
from portal.projects.serializers import ProjectBudgetSerializer


class ProjectListApi(APIView):
    @extend_schema(responses=ProjectBudgetSerializer(many=True),
                   summary="Your projects, with their GPU-hour budgets as of the last poll cycle",
                   description="Submit a job under one with its `account`. Used and left come from "
                               "Slurm's own accounting (`sshare` GrpTRESMins/GrpTRESRaw), read once per "
                               "poll cycle.")
    def get(self, request: Request) -> Response:
        today = timezone.localdate()
        budgets = [project_budget(project=project, today=today)
                   for project in user_projects(user=request.user)]
        return Response(ProjectBudgetSerializer(budgets, many=True).data)
