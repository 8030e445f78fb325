from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.gpus.idle_selectors import idle_state
from portal.gpus.selectors import job_gpu_figures, session_for_gpu, session_gpu_figures
from portal.gpus.serializers import JobGpuSerializer
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
