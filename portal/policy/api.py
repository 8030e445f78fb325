from dataclasses import asdict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.lifecycle.work import work_cluster
from portal.policy.services import policy_current, user_groups


class PolicyApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT,
                   parameters=[OpenApiParameter(
                       "cluster", str, description="A configured cluster's name (GET /api/v1/cluster/ lists "
                                                   "them); none: the default one. An unknown one is a 400.")],
                   summary="Your limits: partitions (GPUs per node, hours, CPUs and memory per GPU), your "
                           "group's defaults and maxima, and the resource profiles you may use, on a cluster")
    def get(self, request: Request) -> Response:
        cluster = work_cluster(request.query_params.get("cluster", ""))
        policy = policy_current().on(cluster)
        groups = user_groups(request.user)
        rules = policy.rules_for(groups)
        return Response({
            "cluster": cluster,
            "default_partition": policy.default_partition,
            "partitions": [asdict(p) for p in policy.partitions.values()
                           if rules.partitions is None or p.name in rules.partitions],
            "limits": asdict(rules),
            "profiles": [asdict(p) for p in policy.profiles_for(groups)],
        })
