from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.benchmarks.serializers import UsageInputSerializer
from portal.benchmarks.usage import UsageQuery, usage_range
from portal.core.errors import NotFound
from portal.gpus.efficiency import gpu_efficiency_rows
from portal.gpus.idle_selectors import idle_state
from portal.gpus.selectors import job_gpu_figures, session_for_gpu, session_gpu_figures
from portal.gpus.serializers import GpuEfficiencySerializer, JobGpuSerializer
from portal.jobs.selectors import job_get


class JobGpuApi(APIView):
    @extend_schema(responses={200: JobGpuSerializer,
                              404: OpenApiResponse(description="No such job, or another user's")},
                   summary="The job's GPU figures: 1-minute points per GPU and a summary",
                   description="What the job's own sampler read from nvidia-smi and pushed (every "
                               "GPU_SAMPLE_SECONDS), from the database: mean and max utilisation, "
                               "peak memory, energy in Wh. At most GPU_POINTS_PER_JOB points; the "
                               "summary covers the whole job. Empty for a job without GPUs.")
    def get(self, request: Request, job_id: int) -> Response:
        job = job_get(user=request.user, job_id=job_id)
        if job is None:
            raise NotFound("No such job.")
        return Response(JobGpuSerializer({**job_gpu_figures(job=job), "idle": idle_state(job=job)}).data)


class SessionGpuApi(APIView):
    @extend_schema(responses={200: JobGpuSerializer,
                              404: OpenApiResponse(description="No such session, or another user's")},
                   summary="The notebook session's GPU figures: 1-minute points per GPU and a summary",
                   description="Your newest session with that name, running or ended (an admin: their "
                               "own, else anybody's newest with that name). What the sampler in the "
                               "session's job read from nvidia-smi and pushed (every GPU_SAMPLE_SECONDS), "
                               "from the database, as for a job. Empty for a session without GPUs.")
    def get(self, request: Request, name: str) -> Response:
        session = session_for_gpu(user=request.user, name=name)
        if session is None:
            raise NotFound("No such session.")
        return Response(JobGpuSerializer({**session_gpu_figures(session=session),
                                          "idle": idle_state(session=session)}).data)


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
