"""GET /api/v1/templates/{slug}/suggested-resources/ and /api/v1/profiles/{name}/suggested-resources/:
what the user's recent runs used and what to ask for (portal.efficiency.suggest)."""

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.models import User
from portal.efficiency.suggest import suggested_resources, suggestion_data
from portal.efficiency.suggest_serializers import SuggestedResourcesSerializer
from portal.jobs.job_templates import catalog
from portal.policy.services import policy_current, user_groups

_TOO_FEW = ("Fewer than {min_runs} of your {what} have ended and been measured yet; the suggestion "
            "needs {min_runs}.")
_DESCRIPTION = (
    "The p95 (nearest rank) of peak memory, of GPUs busy and of the time used over your newest "
    "EFFICIENCY_SUGGEST_RUNS (10) ended {what}, what they asked for (the most and the median), and the "
    "values to ask for next time, rounded as the efficiency advice rounds them (memory: peak + 25 % in "
    "whole GiB; time: used + 50 % in 15 minutes; GPUs: the p95 busy, at least 1 if the runs had GPUs). "
    "A figure Slurm did not measure in any run is null. Fewer than EFFICIENCY_SUGGEST_MIN_RUNS (3) "
    "runs: 200 with `suggestion: null` and a `detail` saying why. Only your own runs count.")


def _answer(*, user: User, template: str = "", profile: str = "") -> Response:
    suggestion = suggested_resources(user=user, template=template, profile=profile)
    min_runs = settings.EFFICIENCY_SUGGEST_MIN_RUNS
    what = "runs of this template" if template else "sessions of this profile"
    return Response(SuggestedResourcesSerializer({
        "template": template, "profile": profile, "min_runs": min_runs,
        "suggestion": suggestion_data(suggestion) if suggestion else None,
        "detail": "" if suggestion else _TOO_FEW.format(min_runs=min_runs, what=what),
    }).data)


class TemplateSuggestionApi(APIView):
    @extend_schema(responses={200: SuggestedResourcesSerializer,
                              404: OpenApiResponse(description="No job template with that slug")},
                   summary="What your recent runs of a job template used, and what to ask for next time",
                   description=_DESCRIPTION.format(what="jobs of the template"))
    def get(self, request: Request, template: str) -> Response:
        if template not in catalog().templates:
            raise NotFound(f"No job template {template[:64]!r} (GET /api/v1/templates/ lists them).")
        return _answer(user=request.user, template=template)


class ProfileSuggestionApi(APIView):
    @extend_schema(responses={200: SuggestedResourcesSerializer,
                              404: OpenApiResponse(description="No session profile of that name for you")},
                   summary="What your recent sessions of a profile used, and what to ask for next time",
                   description=_DESCRIPTION.format(what="sessions started from the profile")
                   + " `time` and `hours` are the session's time.")
    def get(self, request: Request, profile: str) -> Response:
        offered = {p.name for p in policy_current().profiles_for(user_groups(request.user))}
        if profile not in offered:
            raise NotFound(f"No session profile {profile[:30]!r} (GET /api/v1/policy/ lists yours).")
        return _answer(user=request.user, profile=profile)
