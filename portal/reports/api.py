from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import TooLarge
from portal.core.parsers import BoundedJSONParser
from portal.core.schema import ErrorSerializer
from portal.gpus.services import GpuSample
from portal.reports.authentication import HasReportToken, ReportTokenAuthentication
from portal.reports.serializers import (
    GpuReportResultSerializer,
    GpuReportSerializer,
    ReportResultSerializer,
    ReportSerializer,
)
from portal.reports.services import Report, gpu_report_apply, report_apply


class ReportApi(APIView):
    authentication_classes = [ReportTokenAuthentication]
    permission_classes = [HasReportToken]
    parser_classes = [BoundedJSONParser]  # what report.sh sends; no forms
    throttle_scopes = {"POST": "reports"}  # per job, session or app (its token), not per user

    @extend_schema(
        request=PolymorphicProxySerializer(
            component_name="ReportRequest", resource_type_field_name=None,
            serializers=[ReportSerializer, GpuReportSerializer]),
        responses={
            202: PolymorphicProxySerializer(
                component_name="ReportAnswer", resource_type_field_name=None,
                serializers=[ReportResultSerializer, GpuReportResultSerializer]),
            401: OpenApiResponse(ErrorSerializer, description="No report token, not a valid one, or "
                                                              "one whose job ended over the grace ago "
                                                              "(code expired_report_token)"),
            413: OpenApiResponse(ErrorSerializer, description="More GPU samples than one report takes")},
        summary="A job or a session's job reports its own transition (started, ready, exited; queued from "
                "a session's spawner)",
        description="Sent by the job script itself (templates/jobs/_common/report.sh) with its own "
                    "token, `Authorization: Report <token>`; `queued` by the hub's spawner with the "
                    "session's token while its job waits. Idempotent: a repeat or a late report "
                    "answers `applied: false` and changes nothing. `gpu`: a job's or a session's GPU sampler "
                    "(templates/jobs/_common/gpu_sampler.py) pushing a batch of nvidia-smi readings; "
                    "the answer's `interval_seconds` says how often to read. A session's sampler adds "
                    "`activity`, what its Jupyter server is doing (kernels and terminal commands busy) and "
                    "how many of the job's other processes use a CPU (tmux, VS Code's terminal), "
                    "which keeps a session with idle GPUs from being stopped (docs: idle GPUs).",
    )
    def post(self, request: Request) -> Response:
        if isinstance(request.data, dict) and request.data.get("event") == "gpu":
            return self._gpu(request)
        serializer = ReportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        grant = request.auth
        applied = report_apply(kind=grant.kind, pk=grant.pk, report=Report(**serializer.validated_data))
        return Response(ReportResultSerializer({"applied": applied}).data, status=status.HTTP_202_ACCEPTED)

    def _gpu(self, request: Request) -> Response:
        if GpuReportSerializer.too_many(request.data):
            raise TooLarge(f"At most {settings.GPU_SAMPLES_PER_REPORT} samples in one report.")
        serializer = GpuReportSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        grant = request.auth
        samples = [GpuSample(**sample) for sample in serializer.validated_data["samples"]]
        applied = gpu_report_apply(kind=grant.kind, pk=grant.pk, samples=samples,
                                   activity=serializer.validated_data.get("activity"))
        body = {"applied": applied, "interval_seconds": settings.GPU_SAMPLE_SECONDS}
        return Response(GpuReportResultSerializer(body).data, status=status.HTTP_202_ACCEPTED)
