"""REST: benchmark history, one result, comparison, admin import; references."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound as DrfNotFound
from rest_framework.generics import ListAPIView
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.benchmarks.selectors import (
    ResultFilters,
    published_list,
    reference_list,
    result_get,
    result_list,
    results_compare,
)
from portal.benchmarks.serializers import (
    CompareInputSerializer,
    CompareSerializer,
    ImportInputSerializer,
    ImportSerializer,
    PublishedSerializer,
    ReferenceFilterSerializer,
    ReferenceInputSerializer,
    ReferenceSerializer,
    ResultDetailSerializer,
    ResultFilterSerializer,
    ResultSerializer,
)
from portal.benchmarks.services import reference_create, reference_derive, result_import
from portal.core.errors import Forbidden, InvalidInput, NotFound
from portal.core.pagination import CursorPage

_ADMINS = OpenApiResponse(description="Admins only")


def _admin(request: Request) -> None:
    if not request.user.is_staff:
        raise Forbidden("Only portal admins may do this.")


def filters_from(data: dict) -> ResultFilters:
    return ResultFilters(
        tool=data.get("tool"),
        model=data.get("model") or None,
        precision=data.get("precision") or None,
        gpus=data.get("gpus"),
        gpu_type=data.get("gpu_type") or None,
        partition=data.get("partition") or None,
        flagged=data.get("flagged"),
        parsed=data.get("parsed"),
        run_after=data.get("run_after"),
        run_before=data.get("run_before"),
        username=data.get("user"),
    )


class ResultPagination(CursorPage):
    ordering = ("-run_at", "-id")


class ResultListApi(ListAPIView):
    serializer_class = ResultSerializer
    pagination_class = ResultPagination

    def get_queryset(self):  # noqa: ANN201 - DRF hook
        filters = ResultFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return result_list(user=self.request.user, filters=filters_from(filters.validated_data))

    @extend_schema(
        parameters=[ResultFilterSerializer],
        summary="Benchmark results of this site, newest first; cursor pagination",
        description="Every portal user sees the site's results; `job` is given only to the "
        "job's owner and admins. `flagged`: outside its reference when recorded.",
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)


class ResultDetailApi(APIView):
    @extend_schema(
        responses={200: ResultDetailSerializer, 404: OpenApiResponse(description="No such result")},
        summary="One benchmark result with everything its parser returned",
    )
    def get(self, request: Request, result_id: int) -> Response:
        result = result_get(user=request.user, result_id=result_id)
        if result is None:
            raise NotFound("No such benchmark result.")
        return Response(ResultDetailSerializer(result, context={"request": request}).data)


class ResultCompareApi(APIView):
    @extend_schema(
        parameters=[CompareInputSerializer],
        responses=CompareSerializer,
        summary="Chosen results side by side (up to 20), in the order asked",
    )
    def get(self, request: Request) -> Response:
        data = CompareInputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        ids = data.validated_data["ids"]
        results = results_compare(user=request.user, ids=ids)
        found = {r.pk for r in results}
        body = {"results": results, "missing": [i for i in ids if i not in found]}
        return Response(CompareSerializer(body, context={"request": request}).data)


class ResultImportApi(APIView):
    @extend_schema(
        request=ImportInputSerializer,
        responses={201: ImportSerializer, 403: _ADMINS},
        summary="Import a result from outside the portal (admins): parsed like a job's output",
        description="One result per case the output holds (a fio run: one per fio job); an "
        "output that cannot be parsed is kept, unparsed, with the reason.",
    )
    def post(self, request: Request) -> Response:
        _admin(request)
        data = ImportInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        tool, text = values.pop("tool"), values.pop("text")
        results = result_import(user=request.user, tool=tool, text=text, context=values)
        return Response(
            ImportSerializer({"results": results}, context={"request": request}).data,
            status=status.HTTP_201_CREATED,
        )


class ReferencePagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_number(self, request: Request, paginator: object) -> object:
        number = request.query_params.get(self.page_query_param) or 1
        if not str(number).isdigit() and number != "last":
            raise InvalidInput({"page": ["A page number."]})
        return number

    def paginate_queryset(self, queryset: object, request: Request, view: object = None) -> object:
        try:
            return super().paginate_queryset(queryset, request, view)
        except DrfNotFound:
            raise InvalidInput({"page": ["No such page."]}) from None


class ReferenceListCreateApi(ListAPIView):
    pagination_class = ReferencePagination

    def _filters(self) -> dict:
        filters = ReferenceFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        return filters.validated_data

    def get_serializer_class(self):  # noqa: ANN201 - DRF hook
        if self.request.method == "GET" and self.request.query_params.get("kind") == "published":
            return PublishedSerializer
        return ReferenceSerializer

    def get_queryset(self):  # noqa: ANN201 - DRF hook
        data = self._filters()
        if data["kind"] == "published":
            return published_list(metric=data.get("metric")).order_by("id")
        return reference_list(tool=data.get("tool"), metric=data.get("metric")).order_by("id")

    @extend_schema(
        parameters=[ReferenceFilterSerializer],
        responses=ReferenceSerializer(many=True),
        summary="References (kind=site), or the built-in published series (kind=published)",
        description="With kind=published the items are published figures, each with its "
        "`source` and `citation` (see PublishedSerializer in the schema).",
    )
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=ReferenceInputSerializer,
        responses={201: ReferenceSerializer, 403: _ADMINS},
        summary="Set a reference (admins): a value, or `derive_from` past results' median",
        description="Thresholds are signed fractions of the value (ReFrame's convention): "
        "lower -0.1 and upper 0.1 accept results within ±10 %. New results outside "
        "are flagged.",
    )
    def post(self, request: Request) -> Response:
        _admin(request)
        data = ReferenceInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        derive = values.pop("derive_from", None)
        lower, upper = values.pop("lower", None), values.pop("upper", None)
        if derive:
            reference = reference_derive(
                user=request.user,
                result_ids=derive,
                lower=lower,
                upper=upper,
                name=values.get("name", ""),
                partition=values.get("partition"),
                gpu_type=values.get("gpu_type"),
            )
        else:
            values = {
                k: ("" if v is None and k in ("partition", "gpu_type") else v) for k, v in values.items()
            }
            reference = reference_create(user=request.user, lower=lower, upper=upper, **values)
        return Response(ReferenceSerializer(reference).data, status=status.HTTP_201_CREATED)
