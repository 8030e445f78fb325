from dataclasses import asdict

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.policy.services import policy_current, user_groups


class PolicyApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT,
                   summary="Your limits: partitions (GPUs per node, hours, CPUs and memory per GPU), your "
                           "group's defaults and maxima, and the resource profiles you may use")
    def get(self, request: Request) -> Response:
        policy = policy_current()
        groups = user_groups(request.user)
        rules = policy.rules_for(groups)
        return Response({
            "default_partition": policy.default_partition,
            "partitions": [asdict(p) for p in policy.partitions.values()
                           if rules.partitions is None or p.name in rules.partitions],
            "limits": asdict(rules),
            "profiles": [asdict(p) for p in policy.profiles_for(groups)],
        })
