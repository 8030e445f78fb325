from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.core.errors import InvalidInput, NotFound, PortalError
from portal.core.idempotency import IDEMPOTENCY_PARAMETER, idempotency_key, request_digest
from portal.core.pagination import CursorPage
from portal.jobs.job_templates import catalog
from portal.jobs.models import Job
from portal.jobs.selectors import (
    JobFilters,
    JobKey,
    job_find,
    job_get,
    job_list,
    job_metrics_list,
    partition_limits_list,
)
from portal.jobs.serializers import (
    JobBatchResultSerializer,
    JobDetailSerializer,
    JobFilterSerializer,
    JobLogInputSerializer,
    JobLogSerializer,
    JobLookupInputSerializer,
    JobMetricsSerializer,
    JobSerializer,
    JobSubmitInputSerializer,
    TemplateCatalogSerializer,
)
from portal.jobs.services.batch import MAX_ITEMS, JobRequest, jobs_submit_batch
from portal.jobs.services.logs import job_log_read
from portal.jobs.services.submission import job_cancel, job_submit

_NOT_FOUND = OpenApiResponse(description="No such job, or another user's")
_JOB_ID = OpenApiParameter(
    "job_id", OpenApiTypes.STR, OpenApiParameter.PATH,
    description="The job's number (`140`, as in /jobs/140/); with `by`, another of its ids.")
_BY = OpenApiParameter(
    "by", OpenApiTypes.STR, enum=[key.value for key in JobKey], default=JobKey.ID.value,
    description="Which of the job's ids `job_id` is: `id` its number; `slurm` its Slurm job id (`496`, "
                "as squeue shows it; for a sweep, a task's `496_3` finds the sweep's job; a reused id "
                "finds the newest job); `uuid` its Portal ID. Another user's job is a 404 as an "
                "unknown one is. With `slurm` or `uuid`, a value that is not such an id is a 400 naming "
                "`job_id`; with `id`, one that is no job number is a 404 (as on every route with an id).")


def _job_or_404(request: Request, job_id: int) -> Job:
    job = job_get(user=request.user, job_id=job_id)
    if job is None:
        raise NotFound("No such job.")
    return job


class TemplateListApi(APIView):
    @extend_schema(responses=TemplateCatalogSerializer,
                   summary="Job templates, with a JSON Schema of each one's parameters")
    def get(self, request: Request) -> Response:
        found = catalog()
        body = {"templates": list(found.templates.values()), "partitions": partition_limits_list(),
                "broken": found.errors if request.user.is_staff else {}}
        return Response(TemplateCatalogSerializer(body).data)


class JobPagination(CursorPage):
    ordering = ("-submitted_at", "-id")


class JobListCreateApi(ListAPIView):
    serializer_class = JobSerializer
    pagination_class = JobPagination

    def get_queryset(self):  # noqa: ANN201 - DRF hook
        filters = JobFilterSerializer(data=self.request.query_params)
        filters.is_valid(raise_exception=True)
        data = filters.validated_data
        return job_list(user=self.request.user, filters=JobFilters(
            state=data.get("state"), template=data.get("template"), username=data.get("user"),
            submitted_after=data.get("submitted_after"), submitted_before=data.get("submitted_before"),
        ))

    @extend_schema(parameters=[JobFilterSerializer],
                   summary="Your jobs (admins: everybody's), newest first; cursor pagination")
    def get(self, request: Request, *args: object, **kwargs: object) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=PolymorphicProxySerializer(
            component_name="JobSubmitOneOrBatch", resource_type_field_name=None, many=False,
            serializers=[JobSubmitInputSerializer, JobSubmitInputSerializer(many=True)]),
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={201: JobDetailSerializer,
                   200: OpenApiResponse(JobBatchResultSerializer, description="A list was sent: one result "
                                        "per item, in order (each with its own status)"),
                   400: OpenApiResponse(description="Invalid input: nothing was submitted"),
                   409: OpenApiResponse(description="Idempotency-Key reused with another body")},
        summary="Submit a job from a template, or a list of up to 100 (sbatch as you, in the background)",
        description="The job is stored and answered at once, `QUEUED_IN_PORTAL` until a worker's `sbatch` "
                    "makes it `PENDING` (or `REJECTED` with Slurm's message).\n\nA JSON list of job objects "
                    f"(1 to {MAX_ITEMS}) is a batch: each item is validated on its own, the valid ones are "
                    "submitted even when others are refused, and the answer (200) has one result per item, "
                    "in order: status 201 with the job, or the error a single submission of it would have "
                    "got. When no item has a job's shape (each breaks this schema), the answer is 400 "
                    "naming `items`, each with its errors. An Idempotency-Key covers the whole batch.")
    def post(self, request: Request) -> Response:
        key = idempotency_key(request)
        if isinstance(request.data, list):
            return self._post_batch(request, key)
        data = JobSubmitInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        job = job_submit(user=request.user, template=data.validated_data["template"],
                         parameters=data.validated_data["parameters"],
                         name=data.validated_data.get("name") or None, idempotency_key=key,
                         request_digest=request_digest(data.validated_data),
                         notify_email=data.validated_data.get("notify_email"),
                         account=data.validated_data.get("account", ""),
                         cluster=data.validated_data.get("cluster", ""))
        return Response(JobDetailSerializer(job).data, status=status.HTTP_201_CREATED)

    def _post_batch(self, request: Request, key: str) -> Response:
        items = request.data
        if not 1 <= len(items) <= MAX_ITEMS:
            raise InvalidInput({"items": [f"1 to {MAX_ITEMS} jobs per request; {len(items)} given."]})
        if odd := [index for index, item in enumerate(items) if not isinstance(item, dict)]:
            raise InvalidInput({"items": {str(index): ["Must be a job object."] for index in odd[:10]}})
        requests: list[JobRequest | PortalError] = []
        for item in items:
            data = JobSubmitInputSerializer(data=item)
            if not data.is_valid():
                requests.append(InvalidInput(data.errors))
                continue
            valid = data.validated_data
            requests.append(JobRequest(template=valid["template"], parameters=valid["parameters"],
                                       name=valid.get("name") or None, notify_email=valid.get("notify_email"),
                                       account=valid.get("account", ""), cluster=valid.get("cluster", "")))
        if not any(isinstance(item, JobRequest) for item in requests):
            # Not one item has a job's shape: the request is malformed as a whole, as for a single job.
            raise InvalidInput({"items": {str(index): item.fields for index, item in enumerate(requests)
                                          if isinstance(item, InvalidInput)}})
        results = jobs_submit_batch(user=request.user, items=requests, idempotency_key=key,
                                    request_digest=request_digest(items))
        submitted = sum(result.job is not None for result in results)
        return Response(JobBatchResultSerializer({
            "results": results, "submitted": submitted, "refused": len(results) - submitted}).data)


class JobDetailApi(APIView):
    @extend_schema(parameters=[_JOB_ID, _BY], responses={
        200: JobDetailSerializer, 404: _NOT_FOUND,
        400: OpenApiResponse(description="`by` is not one of its values, or `job_id` is not the Slurm job "
                                         "id or Portal ID `by` names")},
                   summary="One job, with its parameters and script, by its number, Slurm job id or "
                           "Portal ID")
    def get(self, request: Request, job_id: str) -> Response:
        query = JobLookupInputSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        job = job_find(user=request.user, key=job_id, by=JobKey(query.validated_data["by"]))
        if job is None:
            raise NotFound("No such job.")
        return Response(JobDetailSerializer(job).data)


class JobCancelApi(APIView):
    throttle_scopes = {"POST": "slurm"}

    @extend_schema(request=None, responses={
        202: JobDetailSerializer, 404: _NOT_FOUND,
        409: OpenApiResponse(description="The job has already ended, or its cluster is no longer configured"),
        503: OpenApiResponse(description="Slurm is unreachable: nothing was cancelled")},
                   summary="Cancel a job (scancel as its owner); the state follows at the next poll")
    def post(self, request: Request, job_id: int) -> Response:
        job = job_cancel(job=_job_or_404(request, job_id))
        return Response(JobDetailSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class JobLogApi(APIView):
    throttle_scopes = {"GET": "job_files"}

    @extend_schema(parameters=[JobLogInputSerializer], responses={
        200: JobLogSerializer, 404: _NOT_FOUND,
        409: OpenApiResponse(description="The file is not the job's own regular file")},
                   summary="A chunk of the job's stdout or stderr from `offset`")
    def get(self, request: Request, job_id: int) -> Response:
        job = _job_or_404(request, job_id)
        data = JobLogInputSerializer(data=request.query_params)
        data.is_valid(raise_exception=True)
        chunk = job_log_read(job=job, stream=data.validated_data["stream"],
                             offset=data.validated_data["offset"])
        return Response(JobLogSerializer(chunk).data)


class JobMetricsApi(APIView):
    @extend_schema(responses={200: JobMetricsSerializer, 404: _NOT_FOUND},
                   summary="The training metrics (TensorBoard scalar series) the job recorded",
                   description="Read from the job's own TensorBoard events (its `TENSORBOARD_LOGDIR`) "
                               "when it ended; empty while it runs or when it wrote none.")
    def get(self, request: Request, job_id: int) -> Response:
        job = _job_or_404(request, job_id)
        body = {"job": job.pk, "series": job_metrics_list(job=job)}
        return Response(JobMetricsSerializer(body).data)

