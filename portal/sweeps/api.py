from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import NotFound
from portal.core.pagination import CursorPage
from portal.sweeps.models import Sweep
from portal.sweeps.selectors import sweep_get, sweep_list, sweep_view
from portal.sweeps.serializers import SweepDetailSerializer, SweepInputSerializer, SweepSerializer
from portal.sweeps.services import SweepSpec, sweep_cancel, sweep_submit

_NOT_FOUND = OpenApiResponse(description="No such sweep, or another user's")


def _sweep_or_404(request: Request, sweep_id: int) -> Sweep:
    sweep = sweep_get(user=request.user, sweep_id=sweep_id)
    if sweep is None:
        raise NotFound("No such sweep.")
    return sweep


class SweepPagination(CursorPage):
    ordering = ("-created_at", "-id")


class SweepListCreateApi(ListAPIView):
    serializer_class = SweepSerializer
    pagination_class = SweepPagination

    def get_queryset(self):  # noqa: ANN201 - DRF hook
        return sweep_list(user=self.request.user)

    @extend_schema(summary="Your sweeps (admins: everybody's), newest first; cursor pagination")
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(request=SweepInputSerializer,
                   responses={201: SweepDetailSerializer,
                              400: OpenApiResponse(description="Invalid input, a task included, or over your "
                                                               "group's limits: nothing was submitted")},
                   summary="Start a sweep: one Slurm job array, one task (and one MLflow run) per value set",
                   description="Every task is validated before the one `sbatch --array=0-(N-1)%K`, which a "
                               "worker runs in the background. At most 1,000 tasks.")
    def post(self, request: Request) -> Response:
        data = SweepInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        sweep = sweep_submit(user=request.user, spec=SweepSpec(**data.validated_data))
        return Response(SweepDetailSerializer.of(sweep_view(sweep=sweep)), status=status.HTTP_201_CREATED)


class SweepDetailApi(APIView):
    @extend_schema(responses={200: SweepDetailSerializer, 404: _NOT_FOUND},
                   summary="A sweep's progress, its tasks' runs with params and final metrics, "
                           "and the best run")
    def get(self, request: Request, sweep_id: int) -> Response:
        return Response(SweepDetailSerializer.of(sweep_view(sweep=_sweep_or_404(request, sweep_id))))


class SweepCancelApi(APIView):
    @extend_schema(request=None, responses={200: SweepDetailSerializer, 404: _NOT_FOUND,
                                            409: OpenApiResponse(description="The sweep has ended")},
                   summary="Cancel the rest of a sweep: one scancel of its array job")
    def post(self, request: Request, sweep_id: int) -> Response:
        sweep = sweep_cancel(sweep=_sweep_or_404(request, sweep_id))
        return Response(SweepDetailSerializer.of(sweep_view(sweep=sweep)))
