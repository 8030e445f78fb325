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
