from typing import Any

from rest_framework import serializers


class ProjectBudgetSerializer(serializers.Serializer):
    name = serializers.CharField(source="project.name")
    account = serializers.CharField(source="project.slurm_account",
                                    help_text="What to pass as `account` (sbatch --account)")
    limit_gpu_hours = serializers.FloatField(source="limit_hours", allow_null=True,
                                             help_text="The budget Slurm enforces; null: none")
    used_gpu_hours = serializers.FloatField(source="used_hours", allow_null=True,
                                            help_text="As Slurm counts it (decayed); null: not read yet")
    left_gpu_hours = serializers.FloatField(source="left_hours", allow_null=True)
    used_fraction = serializers.FloatField(allow_null=True)
    burn_gpu_hours_per_day = serializers.FloatField(source="burn_hours_per_day", allow_null=True,
                                                    help_text="Over the last 14 days")
    run_out = serializers.DateField(allow_null=True, help_text="Projected at that burn")
    level = serializers.CharField(help_text="'', 'warning' (80 %) or 'exhausted' (100 %)")
    checked_at = serializers.DateTimeField(source="project.usage_checked_at", allow_null=True)


class ClusterBudgetSerializer(serializers.Serializer):
    """A project's budget on another cluster (#38): GrpTRESMins on its association there."""

    cluster = serializers.CharField(help_text="The cluster's name (what the job API's `cluster` takes)")
    cluster_title = serializers.CharField()
    limit_gpu_hours = serializers.FloatField(source="limit_hours", allow_null=True,
                                             help_text="The budget Slurm enforces there; null: none")
    used_gpu_hours = serializers.FloatField(source="used_hours", allow_null=True,
                                            help_text="As that cluster's Slurm counts it; null: not read yet")
    left_gpu_hours = serializers.FloatField(source="left_hours", allow_null=True)
    used_fraction = serializers.FloatField(allow_null=True)
    level = serializers.CharField(help_text="'', 'warning' (80 %) or 'exhausted' (100 %)")
    checked_at = serializers.DateTimeField(allow_null=True)


class ProjectOutlookSerializer(ProjectBudgetSerializer):
    """A project's budget, plus what decides whether a job would start sooner under it."""

    partition = serializers.CharField(help_text="Where `pending_jobs` are counted")
    fairshare = serializers.FloatField(
        allow_null=True, help_text="Your fair-share factor in the project's account (sshare, 0..1; higher "
                                   "ranks higher in sprio); null: not read yet")
    pending_jobs = serializers.IntegerField(source="pending",
                                            help_text="Jobs (anybody's) pending under its account there")
    sooner = serializers.BooleanField(help_text="The project that would likely start a job sooner")
    sooner_reason = serializers.CharField(source="why", help_text="Why, in one line; empty on the others")
    other_clusters = ClusterBudgetSerializer(
        many=True, help_text="Where several clusters are configured: its budgets on the clusters other than "
                             "the default one, whose budget the fields above are; empty with one cluster")

    def to_representation(self, instance: Any) -> dict[str, Any]:
        """The budget's fields from its Budget, the rest from the Outlook."""
        data = ProjectBudgetSerializer(instance.budget).data
        for name in set(self.fields) - set(ProjectBudgetSerializer._declared_fields):
            value = self.fields[name].get_attribute(instance)
            data[name] = None if value is None else self.fields[name].to_representation(value)
        return data
