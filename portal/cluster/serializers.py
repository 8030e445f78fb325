from rest_framework import serializers


class GpuTypeSerializer(serializers.Serializer):
    type = serializers.CharField(source="gpu_type")
    total = serializers.IntegerField()
    allocated = serializers.IntegerField()
    unavailable = serializers.IntegerField()
    free = serializers.IntegerField()


class PartitionSerializer(serializers.Serializer):
    name = serializers.CharField()
    is_default = serializers.BooleanField()
    max_time_minutes = serializers.SerializerMethodField(help_text="null means unlimited")
    nodes = serializers.IntegerField(source="node_count")
    cpus_total = serializers.IntegerField()
    cpus_allocated = serializers.IntegerField()
    running_jobs = serializers.IntegerField()
    pending_jobs = serializers.IntegerField()
    gpus_total = serializers.SerializerMethodField()
    gpus_allocated = serializers.SerializerMethodField()
    gpus_free = serializers.SerializerMethodField()
    gpu_types = GpuTypeSerializer(source="gpus", many=True)

    def get_max_time_minutes(self, partition: object) -> int | None:
        max_time = partition.max_time
        return None if max_time is None else int(max_time.total_seconds() // 60)

    def get_gpus_total(self, partition: object) -> int:
        return sum(gpu.total for gpu in partition.gpus.all())

    def get_gpus_allocated(self, partition: object) -> int:
        return sum(gpu.allocated for gpu in partition.gpus.all())

    def get_gpus_free(self, partition: object) -> int:
        return sum(gpu.free for gpu in partition.gpus.all())


class NodeSerializer(serializers.Serializer):
    name = serializers.CharField()
    state = serializers.CharField()
    partitions = serializers.ListField(child=serializers.CharField())
    cpus_total = serializers.IntegerField()
    cpus_allocated = serializers.IntegerField()
    memory_mb = serializers.IntegerField()
    memory_allocated_mb = serializers.IntegerField()
    gpus = serializers.DictField(child=serializers.IntegerField())
    gpus_used = serializers.DictField(child=serializers.IntegerField())


class FiguresSerializer(serializers.Serializer):
    nodes = serializers.IntegerField()
    gpus_total = serializers.IntegerField()
    gpus_allocated = serializers.IntegerField()
    gpus_unavailable = serializers.IntegerField(help_text="On nodes that cannot run jobs (down, drained)")
    gpus_free = serializers.IntegerField()
    running_jobs = serializers.IntegerField()
    pending_jobs = serializers.IntegerField()


class ClusterSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="Slurm's ClusterName: what `cluster` takes elsewhere")
    title = serializers.CharField()
    refreshed_at = serializers.DateTimeField(allow_null=True,
                                             help_text="When this cluster's Slurm last answered its poll")
    checked_at = serializers.DateTimeField(allow_null=True)
    stale = serializers.BooleanField(help_text="Older than a few poll cycles, or its last poll failed")
    error = serializers.CharField(help_text="Why its last poll failed; empty if it did not")
    figures = FiguresSerializer()
    partitions = PartitionSerializer(many=True)
    nodes = NodeSerializer(many=True)


class ClusterOverviewSerializer(serializers.Serializer):
    """The default cluster's snapshot at the top (as on a one-cluster site), then every configured
    cluster's, the default one first, and their totals."""

    refreshed_at = serializers.DateTimeField(source="default.refreshed_at", allow_null=True,
                                             help_text="When Slurm last answered the poll")
    checked_at = serializers.DateTimeField(source="default.checked_at", allow_null=True)
    stale = serializers.BooleanField(source="default.stale")
    error = serializers.CharField(source="default.error",
                                  help_text="Why the last poll failed; empty if it did not")
    partitions = PartitionSerializer(source="default.partitions", many=True)
    nodes = NodeSerializer(source="default.nodes", many=True)
    clusters = ClusterSerializer(many=True)
    totals = FiguresSerializer(help_text="Over every configured cluster")
