from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from portal.benchmarks.models import BenchmarkResult, PublishedResult, Reference
from portal.benchmarks.services import reference_derive
from portal.core.errors import InvalidInput


@admin.action(description="Derive a reference (median, ±10 %%) from the selected results")
def derive_reference(modeladmin: admin.ModelAdmin, request: HttpRequest, queryset: QuerySet) -> None:
    try:
        reference = reference_derive(
            user=request.user, result_ids=list(queryset.values_list("pk", flat=True)), lower=-0.1, upper=0.1
        )
    except InvalidInput as error:
        modeladmin.message_user(request, f"No reference: {error.fields}", messages.ERROR)
    else:
        modeladmin.message_user(
            request,
            f"Reference #{reference.pk} set at {reference.value:g} {reference.unit}; "
            "edit its thresholds and scope under References.",
        )


@admin.register(BenchmarkResult)
class BenchmarkResultAdmin(admin.ModelAdmin):
    """Results come from jobs and imports (the import page); admins read them and derive references."""

    list_display = [
        "id",
        "tool",
        "model",
        "case",
        "precision",
        "gpus",
        "gpu_type",
        "partition",
        "value",
        "unit",
        "parsed",
        "flagged",
        "run_at",
        "user",
    ]
    list_filter = ["tool", "parsed", "flagged", "source"]
    search_fields = ["model", "case", "partition", "gpu_type", "user__username"]
    list_select_related = ["user"]
    show_full_result_count = False  # no COUNT(*) over a long history
    readonly_fields = [field.name for field in BenchmarkResult._meta.fields]
    actions = [derive_reference]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        return super().get_queryset(request).defer("data")


@admin.register(Reference)
class ReferenceAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "name",
        "tool",
        "metric",
        "model",
        "precision",
        "gpus",
        "partition",
        "gpu_type",
        "value",
        "lower",
        "upper",
        "unit",
        "origin",
    ]
    list_filter = ["tool", "origin"]
    readonly_fields = ["origin", "derived_from", "created_by", "created_at"]

    def save_model(self, request: HttpRequest, obj: Reference, form: object, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(PublishedResult)
class PublishedResultAdmin(admin.ModelAdmin):
    """Built in and read-only: shipped with the portal, each figure with its source."""

    list_display = [
        "id",
        "benchmark",
        "model",
        "gpu",
        "gpus",
        "precision",
        "metric",
        "value",
        "unit",
        "source",
    ]
    list_filter = ["benchmark", "metric"]
    search_fields = ["model", "source", "section", "gpu"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
