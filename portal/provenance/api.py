from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.provenance.export import provenance_crate
from portal.provenance.models import Provenance
from portal.provenance.selectors import (
    provenance_compare,
    provenance_get,
    provenance_pair,
    session_provenance_get,
)
from portal.provenance.serializers import (
    ProvenanceDiffSerializer,
    ProvenanceSerializer,
    SessionProvenanceSerializer,
)

NOT_FOUND = OpenApiResponse(description="No such job, another user's, or one stored before provenance "
                                        "was recorded")


def _record(request: Request, job_id: int) -> Provenance:
    record = provenance_get(user=request.user, job_id=job_id)
    if record is None:
        raise NotFound("No provenance for such a job.")
    return record


class ProvenanceApi(APIView):
    @extend_schema(responses={200: ProvenanceSerializer, 404: NOT_FOUND},
                   summary="What made the job: script, parameters, resources, image digest, "
                           "environment lock, and what the job recorded of its code and inputs",
                   description="The portal's part is written when the job is stored. The job's own part "
                               "(`captured`: git commit, remote and diff of its inputs' work trees, each "
                               "input's size, time and SHA-256, the node's GPUs), recorded by the job as "
                               "its user at its start, is read once it has ended (`capture_state`).")
    def get(self, request: Request, job_id: int) -> Response:
        return Response(ProvenanceSerializer(_record(request, job_id)).data)


class ProvenanceExportApi(APIView):
    @extend_schema(responses={(200, "application/zip"): OpenApiTypes.BINARY, 404: NOT_FOUND},
                   summary="The job's provenance as an RO-Crate (Workflow Run Crate profile), zipped",
                   description="The script (the workflow), the environment's lock, the code's diff, the "
                               "input manifest and the whole record, with a CreateAction for the run.")
    def get(self, request: Request, job_id: int) -> HttpResponse:
        record = _record(request, job_id)
        response = HttpResponse(provenance_crate(record), content_type="application/zip")
        response["Content-Disposition"] = f'attachment; filename="job-{record.job.uuid}-provenance.zip"'
        return response


class ProvenanceDiffApi(APIView):
    @extend_schema(parameters=[OpenApiParameter("other", int, required=True,
                                                description="The id of the other job (yours)")],
                   responses={200: ProvenanceDiffSerializer, 404: NOT_FOUND,
                              400: OpenApiResponse(description="`other` missing or not a job id")},
                   summary="What differs between this job and another: provenance field by field, "
                           "run-time facts apart, packages, inputs per file, and results",
                   description="Each field is marked same or different. A faithful rerun's verdict is "
                               "\"Only run-time facts differ.\" From the database only.")
    def get(self, request: Request, job_id: int) -> Response:
        this, other = provenance_pair(user=request.user, job_id=job_id,
                                      other=request.query_params.get("other", ""))
        return Response(ProvenanceDiffSerializer(provenance_compare(this, other)).data)


class SessionProvenanceApi(APIView):
    @extend_schema(responses={200: SessionProvenanceSerializer,
                              404: OpenApiResponse(description="No such session of yours, or one started "
                                                               "before provenance was recorded")},
                   summary="What your session started with: environment and its lock's hash, image "
                           "digest, resources",
                   description="Written when the session was stored; the newest session of that name.")
    def get(self, request: Request, name: str) -> Response:
        record = session_provenance_get(user=request.user, name=name)
        if record is None:
            raise NotFound("No provenance for such a session.")
        return Response(SessionProvenanceSerializer(record).data)
