from rest_framework import serializers


class WaitingPrioritySerializer(serializers.Serializer):
    age = serializers.IntegerField(help_text="Grows the longer it waits")
    fairshare = serializers.IntegerField(help_text="Higher when you (and your project) used little lately")
    jobsize = serializers.IntegerField(help_text="From the size of the request")
    partition = serializers.IntegerField(help_text="The partition's priority")
    qos = serializers.IntegerField(help_text="The quality of service's priority")
    total = serializers.IntegerField(help_text="The job's priority; higher starts first")


class WaitingSerializer(serializers.Serializer):
    """Why a pending job waits, as of the poll cycle's last look (`as_of`)."""

    reason = serializers.CharField(help_text="Slurm's pending reason as squeue prints it, e.g. Resources")
    reason_text = serializers.CharField(help_text="The reason in plain words")
    estimated_start = serializers.DateTimeField(
        allow_null=True, help_text="When Slurm's scheduler expects to start it (squeue --start); null "
                                   "when it has no estimate yet")
    partition = serializers.CharField()
    position = serializers.IntegerField(
        allow_null=True, help_text="Its place among the partition's pending jobs that may start now, by "
                                   "priority (1 = next); null when it may not start yet (held, --begin...)")
    pending_in_partition = serializers.IntegerField(allow_null=True, help_text="How many such jobs there are")
    priority = WaitingPrioritySerializer(
        allow_null=True, help_text="Its priority and weighted factors, as sprio prints them; null when sprio "
                                   "lists no such job")
    fairshare = serializers.FloatField(
        allow_null=True, help_text="Your fair share in the job's account, 0 to 1 (sshare's FairShare): "
                                   "1 when you used little lately")
    as_of = serializers.DateTimeField(source="updated_at", help_text="The poll cycle that saw it")
