"""GET /api/v1/runs/compare/?runs=<id>,<id>: what the compare page shows, as JSON
(portal.tracking.compare)."""

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.tracking.compare import COMPARE_RUNS_MAX, compare_run_ids, runs_compare


class ComparedRunSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    run_name = serializers.CharField()
    label = serializers.CharField(help_text="The run's name in `curves` (with its id's start if two "
                                            "share it)")
    experiment_id = serializers.CharField()
    status = serializers.CharField()
    start_time = serializers.IntegerField(help_text="Milliseconds since the epoch, as MLflow's")


class ParamRowSerializer(serializers.Serializer):
    key = serializers.CharField()
    values = serializers.ListField(child=serializers.CharField(allow_null=True),
                                   help_text="Each run's value, in the order of `runs` (null: not logged)")
    differs = serializers.BooleanField()


class CurveSerializer(serializers.Serializer):
    run = serializers.CharField(help_text="The run's label")
    key = serializers.CharField(source="tag")
    steps = serializers.ListField(child=serializers.IntegerField())
    values = serializers.ListField(child=serializers.FloatField(allow_null=True),
                                   help_text="null where the run logged NaN or infinity")


class SeedPointSerializer(serializers.Serializer):
    key = serializers.CharField(source="tag")
    step = serializers.IntegerField()
    mean = serializers.FloatField()
    min = serializers.FloatField()
    max = serializers.FloatField()
    runs = serializers.IntegerField(help_text="How many of the group's runs have a value at this step")


class SeedGroupSerializer(serializers.Serializer):
    label = serializers.CharField()
    run_ids = serializers.ListField(child=serializers.CharField())
    points = SeedPointSerializer(many=True)


class ComparisonSerializer(serializers.Serializer):
    runs = ComparedRunSerializer(many=True)
    params = ParamRowSerializer(many=True)
    curves = CurveSerializer(many=True)
    seed_groups = SeedGroupSerializer(many=True, help_text="Runs whose params differ only in `seed`")


class RunsCompareApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("runs", str, required=True,
                                     description=f"Run ids, comma-separated (or repeated); at most "
                                                 f"{COMPARE_RUNS_MAX}")],
        responses={200: ComparisonSerializer, 404: OpenApiResponse(description="A run that is not yours")},
        summary="Compare your runs: params diff, metric curves, seeds as a mean with its spread")
    def get(self, request: Request) -> Response:
        run_ids = compare_run_ids(request.query_params.getlist("runs"))
        comparison = runs_compare(user=request.user, run_ids=run_ids)
        runs = [{"run_id": run.run_id, "run_name": run.run_name, "label": label,
                 "experiment_id": str(run.experiment_id), "status": run.status, "start_time": run.start_time}
                for run, label in zip(comparison.runs, comparison.labels, strict=True)]
        groups = [{"label": group.label, "run_ids": [run.run_id for run in group.runs],
                   "points": [row for row in comparison.seed_points if row["group"] == group.label]}
                  for group in comparison.groups]
        return Response(ComparisonSerializer({"runs": runs, "params": comparison.params,
                                              "curves": comparison.curves, "seed_groups": groups}).data)
