from rest_framework import serializers


class AdviceSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["cpu", "memory", "gpu", "time"])
    text = serializers.CharField(help_text="The advice in words, with the value to ask for")
    option = serializers.CharField(help_text="The value to ask for: a job's `#SBATCH` option (`--mem=6G`), "
                                             "a session's field as `gpuportal session start` takes it "
                                             "(`--hours 1.5`)")


class ResourceSerializer(serializers.Serializer):
    allocated = serializers.FloatField(allow_null=True)
    used = serializers.FloatField(allow_null=True)
    efficiency = serializers.FloatField(allow_null=True, help_text="used ÷ allocated, from 0; null: unknown")


class EfficiencySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["job", "session"])
    job = serializers.IntegerField(source="record.job_id", allow_null=True,
                                   help_text="The job's number; null for a session")
    session = serializers.CharField(source="record.session.name", default=None, allow_null=True,
                                    help_text="The session's name; null for a job")
    name = serializers.CharField(help_text="The job's name, or the session's")
    slurm_job_id = serializers.CharField(help_text="Slurm's job id")
    user = serializers.CharField(source="record.user.username")
    partition = serializers.CharField(source="record.partition")
    state = serializers.CharField(source="record.state", help_text="Slurm's final state")
    ended_at = serializers.DateTimeField(source="record.ended_at")
    nodes = serializers.IntegerField(source="record.nodes")
    cpu = ResourceSerializer(help_text="Cores, all nodes; used: cores busy on average (TotalCPU ÷ Elapsed)")
    memory = ResourceSerializer(help_text="MiB, as Slurm counts them; allocated: ReqMem, all nodes; "
                                          "used: the largest MaxRSS of its steps")
    gpu = ResourceSerializer(help_text="GPUs, all nodes; used: those whose mean use reached the busy line; "
                                       "efficiency: the mean utilisation of every GPU sample ÷ 100")
    time = ResourceSerializer(help_text="Seconds; allocated: the time limit; used: Elapsed")
    advice = AdviceSerializer(many=True, help_text="What to ask for next time; empty for efficient work")

