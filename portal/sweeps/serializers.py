from rest_framework import serializers

from portal.sweeps.models import Direction, Method, Sweep
from portal.sweeps.selectors import PROGRESS_KEYS, SweepView


class SweepInputSerializer(serializers.Serializer):
    template = serializers.CharField(max_length=64, help_text="A job template whose script takes per-task "
                                     "arguments (pytorch-train)")
    parameters = serializers.DictField(required=False, default=dict,
                                       help_text="The template's parameters, the same for every task")
    name = serializers.CharField(max_length=64, required=False, default="")
    account = serializers.CharField(max_length=32, required=False, default="", allow_blank=True)
    cluster = serializers.CharField(
        max_length=40, required=False, default="", allow_blank=True,
        help_text="The name of a configured cluster (its Slurm ClusterName); default: the default cluster")
    method = serializers.ChoiceField(choices=Method.choices)
    space = serializers.JSONField(help_text="grid: {name: [values]}; random: {name: [values] or "
                                  "{min, max, log}}; list: [{name: value}, ...]. Each name is passed to the "
                                  "script as --name value.")
    samples = serializers.IntegerField(required=False, allow_null=True, default=None,
                                       help_text="random: how many tasks")
    seed = serializers.IntegerField(required=False, allow_null=True, default=None,
                                    help_text="random: the seed")
    concurrency = serializers.IntegerField(min_value=1,
                                           help_text="At most this many tasks run at once (%K)")
    objective = serializers.CharField(max_length=250,
                                      help_text="The metric to optimise, as the script logs it")
    direction = serializers.ChoiceField(choices=Direction.choices)


class SweepSerializer(serializers.ModelSerializer):
    job_id = serializers.IntegerField(allow_null=True)
    slurm_job_id = serializers.CharField(source="job.slurm_job_id", allow_null=True, default=None)
    state = serializers.CharField(source="job.state", allow_null=True, default=None)
    task_count = serializers.SerializerMethodField()

    class Meta:
        model = Sweep
        fields = ["id", "name", "cluster", "template", "parameters", "method", "space", "seed", "concurrency",
                  "objective", "direction", "job_id", "slurm_job_id", "state", "task_count", "created_at"]

    def get_task_count(self, sweep: Sweep) -> int:
        return len(sweep.tasks)


class TaskRunSerializer(serializers.Serializer):
    index = serializers.IntegerField(help_text="SLURM_ARRAY_TASK_ID")
    values = serializers.DictField(help_text="The task's varied values")
    state = serializers.ChoiceField(choices=PROGRESS_KEYS)
    run_id = serializers.CharField(allow_null=True, help_text="Its MLflow run (null: none logged yet)")
    run_name = serializers.CharField()
    status = serializers.CharField(help_text="The run's MLflow status")
    metrics = serializers.DictField(child=serializers.FloatField(allow_null=True),
                                    help_text="Each metric's last value (null: NaN)")
    best = serializers.BooleanField()


class SweepDetailSerializer(serializers.Serializer):
    sweep = SweepSerializer()
    progress = serializers.DictField(child=serializers.IntegerField(),
                                     help_text="Tasks pending, running, done, failed, cancelled")
    tasks = TaskRunSerializer(many=True)
    best = TaskRunSerializer(allow_null=True, help_text="The best run by the objective and direction")

    @classmethod
    def of(cls, view: SweepView) -> dict:
        return cls({"sweep": view.sweep, "progress": view.progress, "tasks": view.tasks,
                    "best": view.best}).data
