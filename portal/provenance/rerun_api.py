"""Re-run exactly (portal.provenance.rerun): the API beside the job's provenance."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.jobs.serializers import JobDetailSerializer
from portal.provenance.rerun import job_rerun
from portal.provenance.selectors import provenance_get

NOT_FOUND = OpenApiResponse(description="No such job of yours (or one stored before provenance was recorded)")


class RerunInputSerializer(serializers.Serializer):
    run_anyway = serializers.BooleanField(default=False, help_text="Re-run even though inputs changed "
                                                                   "or went missing since the run")


class RerunsSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    rerun_of = serializers.IntegerField(allow_null=True, help_text="The job this one re-runs")
    reruns = serializers.ListField(child=serializers.IntegerField(),
                                   help_text="This job's re-runs, oldest first")


class RerunApi(APIView):
    @extend_schema(responses={200: RerunsSerializer, 404: NOT_FOUND},
                   summary="The job's original (if it is a re-run) and its re-runs")
    def get(self, request: Request, job_id: int) -> Response:
        record = provenance_get(user=request.user, job_id=job_id)
        if record is None:
            raise NotFound("No provenance for such a job.")
        reruns = list(record.job.reruns.order_by("job_id").values_list("job_id", flat=True))
        return Response(RerunsSerializer({"job": record.job_id, "rerun_of": record.rerun_of_id,
                                          "reruns": reruns}).data)

    @extend_schema(request=RerunInputSerializer, responses={
        201: JobDetailSerializer, 404: NOT_FOUND,
        400: OpenApiResponse(description="The record no longer passes the submit's checks (policy, "
                                         "partition, limits): `fields` names why"),
        409: OpenApiResponse(description="`inputs_changed`: `fields.inputs` lists each changed or missing "
                                         "input ({path, reason}); `provenance_incomplete`: the job never "
                                         "wrote its part of the record; `environment_changed`: the "
                                         "environment's lock changed and cannot be rebuilt here"),
        503: OpenApiResponse(description="The inputs could not be checked as you")},
        summary="Submit a new job exactly as this one ran: same parameters and resources, image by digest, "
                "environment by lock, code at its commit with its diff",
        description="The inputs are checked against the record first, as you. The new job's provenance "
                    "names this one as `rerun_of`.")
    def post(self, request: Request, job_id: int) -> Response:
        if provenance_get(user=request.user, job_id=job_id) is None:  # before the body: another's is a 404
            raise NotFound("No provenance for such a job.")
        data = RerunInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = job_rerun(user=request.user, job_id=job_id, run_anyway=data.validated_data["run_anyway"])
        return Response(JobDetailSerializer(job).data, status=status.HTTP_201_CREATED)
