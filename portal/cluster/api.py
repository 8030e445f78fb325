from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.cluster.selectors import clusters_overview
from portal.cluster.serializers import ClusterOverviewSerializer


class ClusterApi(APIView):
    @extend_schema(responses=ClusterOverviewSerializer,
                   summary="Partitions, nodes and GPUs of every cluster, from the portal's last Slurm polls")
    def get(self, request: Request) -> Response:
        return Response(ClusterOverviewSerializer(clusters_overview()).data)
