"""GET /api/v1/runs/{run_id}/artifacts/: the files of one of your runs (portal.tracking.artifacts)."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.tracking.artifacts import ARTIFACTS_MAX, run_artifacts


class ArtifactFileSerializer(serializers.Serializer):
    path = serializers.CharField(help_text="Relative to the run's artifact folder")
    size = serializers.IntegerField(help_text="Bytes")


class RunArtifactsSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    artifact_uri = serializers.CharField(help_text="A folder of the run owner's, where the client writes")
    exists = serializers.BooleanField(help_text="False until the run's first artifact")
    files = ArtifactFileSerializer(many=True)
    truncated = serializers.BooleanField(help_text=f"More than {ARTIFACTS_MAX} files: the first ones, "
                                                   "in path order")


class RunArtifactsApi(APIView):
    throttle_scopes = {"GET": "job_files"}  # each listing forks sudo and the files helper
    @extend_schema(
        responses={200: RunArtifactsSerializer,
                   404: OpenApiResponse(description="No such run, or not yours"),
                   409: OpenApiResponse(description="The folder is outside the owner's home, or reached "
                                                    "through a link"),
                   503: OpenApiResponse(description="The owner's files did not answer in time")},
        summary="List a run's artifact files (read as the run's owner, never as root)")
    def get(self, request: Request, run_id: str) -> Response:
        found = run_artifacts(user=request.user, run_id=run_id)
        return Response(RunArtifactsSerializer({
            "run_id": found.run.run_id, "artifact_uri": found.run.artifact_uri, "exists": found.exists,
            "files": [{"path": path, "size": size} for path, size in found.files],
            "truncated": found.truncated}).data)
