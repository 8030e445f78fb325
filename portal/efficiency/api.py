"""GET /api/v1/jobs/{job_id}/efficiency/ and /api/v1/sessions/{name}/efficiency/: what an ended job or
session used of what it was given, and what to ask for next time (portal.efficiency.selectors)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.efficiency.selectors import job_efficiency, session_efficiency
from portal.efficiency.serializers import EfficiencySerializer
from portal.jobs.selectors import JobKey
from portal.jobs.serializers import JobLookupInputSerializer

_FIGURES = ("From the database: the record the poll cycle writes from Slurm's accounting (sacct) and "
            "the GPU samples once the work has ended. Efficiencies as `seff` computes them (CPU: "
            "TotalCPU ÷ (Elapsed x cores); memory: peak RSS ÷ ReqMem; time: Elapsed ÷ the limit) and "
            "GPUs' as the mean utilisation of every sample; null where Slurm or the sampler had no figure. "
            "`advice` lists what to ask for next time; none for efficient work, and no memory or time "
            "advice for a run shorter than EFFICIENCY_SHORT_RUN_MINUTES.")
_NOT_YET = OpenApiResponse(description="No efficiency yet (`code`: `no_efficiency`): it has not ended, or "
                                       "the poll cycle has not recorded its figures")
_JOB_ID = OpenApiParameter(
    "job_id", OpenApiTypes.STR, OpenApiParameter.PATH,
    description="The job's number (`140`); with `by`, another of its ids, as GET /api/v1/jobs/{job_id}/.")
_BY = OpenApiParameter("by", OpenApiTypes.STR, enum=[key.value for key in JobKey], default=JobKey.ID.value,
                       description="Which of the job's ids `job_id` is: `id`, `slurm` or `uuid` (as for "
                                   "GET /api/v1/jobs/{job_id}/).")


class JobEfficiencyApi(APIView):
    @extend_schema(parameters=[_JOB_ID, _BY], responses={
        200: EfficiencySerializer, 404: OpenApiResponse(description="No such job, or another user's"),
        400: OpenApiResponse(description="`by` is not one of its values, or `job_id` is not the Slurm job "
                                         "id or Portal ID `by` names"),
        409: _NOT_YET}, summary="What an ended job used of what it asked for, and what to ask for next time",
        description=_FIGURES)
    def get(self, request: Request, job_id: str) -> Response:
        query = JobLookupInputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        view = job_efficiency(user=request.user, job_id=job_id, by=JobKey(query.validated_data["by"]))
        return Response(EfficiencySerializer(view).data)


class SessionEfficiencyApi(APIView):
    @extend_schema(responses={
        200: EfficiencySerializer, 404: OpenApiResponse(description="No session of yours with that name"),
        409: _NOT_YET}, summary="What your newest ended session with that name used, and what to ask for",
        description="A name is reused over time: this is the newest session with that name that has "
                    "ended and has a record, not a running one (an admin: their own, else anybody's with "
                    "that name). `ended_at` and `slurm_job_id` say which. " + _FIGURES)
    def get(self, request: Request, name: str) -> Response:
        return Response(EfficiencySerializer(session_efficiency(user=request.user, name=name)).data)
