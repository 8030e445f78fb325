from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from portal.projects.models import Project, ProjectClusterBudget
from portal.projects.tasks import projects_apply
from slurm.clusters import clusters_from_settings


def _other_clusters() -> list[tuple[str, str]]:
    return [(cluster.name, cluster.title) for cluster in clusters_from_settings().all if not cluster.default]


class ClusterBudgetForm(forms.ModelForm):
    # The clusters configured now, by title: a name no cluster has is refused, naming the field.
    cluster = forms.ChoiceField(choices=_other_clusters)

    class Meta:
        model = ProjectClusterBudget
        fields = ["cluster", "gpu_hours"]


class ClusterBudgetInline(admin.TabularInline):
    """A project's budgets on the clusters other than the default one (#38); only where several are
    configured. 'Apply to Slurm' (or the next sync) sets them on each cluster's association."""

    model = ProjectClusterBudget
    form = ClusterBudgetForm
    extra = 0
    fields = ["cluster", "gpu_hours", "slurm_limit_gpu_minutes", "used_gpu_minutes", "usage_checked_at"]
    readonly_fields = ["slurm_limit_gpu_minutes", "used_gpu_minutes", "usage_checked_at"]
    verbose_name = "budget on another cluster"
    verbose_name_plural = "budgets on other clusters"

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        kwargs["max_num"] = len(_other_clusters())
        return super().get_formset(request, obj, **kwargs)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "ldap_group", "slurm_account", "budget_gpu_hours", "used_gpu_minutes",
                    "usage_checked_at", "synced_at"]
    readonly_fields = ["slurm_limit_gpu_minutes", "used_gpu_minutes", "usage_checked_at", "synced_at"]
    actions = ["apply_to_slurm"]
    inlines = [ClusterBudgetInline]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        if (clusters := clusters_from_settings()).several:  # the project's own budget is one cluster's
            form.base_fields["budget_gpu_hours"].help_text = (
                f"On the default cluster, {clusters.default.title}; the others' below. "
                + Project._meta.get_field("budget_gpu_hours").help_text)
        return form

    def get_inline_instances(self, request: HttpRequest, obj: Project | None = None) -> list[Any]:
        """No other cluster's budgets on a one-cluster site: its page is as before."""
        return super().get_inline_instances(request, obj) if clusters_from_settings().several else []

    @admin.action(description="Apply to Slurm (account, members from LDAP, budget)")
    def apply_to_slurm(self, request: HttpRequest, queryset: QuerySet[Project]) -> None:
        try:
            projects_apply.delay(list(queryset.values_list("pk", flat=True)))
        except Exception as error:  # any broker failure: say so, never a 5xx
            self.message_user(request, f"Not queued, the workers are unreachable: {error}", messages.ERROR)
            return
        self.message_user(request, "Queued: a worker applies them to Slurm now; 'Synced at' shows when.")
