from rest_framework import serializers


class SuggestionSerializer(serializers.Serializer):
    runs = serializers.IntegerField(help_text="How many of the newest runs the figures come from")
    mem_peak_mb_p95 = serializers.FloatField(allow_null=True, help_text="p95 of peak RSS (MaxRSS), MiB")
    mem_requested_mb_max = serializers.FloatField(allow_null=True, help_text="The most memory asked, MiB")
    mem_requested_mb_typical = serializers.FloatField(allow_null=True, help_text="The median asked, MiB")
    gpus_busy_p95 = serializers.IntegerField(allow_null=True, help_text="p95 of the GPUs busy, all nodes")
    gpus_max = serializers.IntegerField(help_text="The most GPUs allocated, all nodes")
    gpus_typical = serializers.IntegerField(help_text="The median allocated")
    elapsed_seconds_p95 = serializers.IntegerField(allow_null=True, help_text="p95 of the time used")
    time_limit_seconds_max = serializers.IntegerField(allow_null=True)
    time_limit_seconds_typical = serializers.IntegerField(allow_null=True)
    memory_gb = serializers.IntegerField(allow_null=True, help_text="Memory to ask for: `--mem=<N>G`")
    gpus = serializers.IntegerField(allow_null=True,
                                    help_text="GPUs to ask for, all nodes: at least 1 if the runs had any")
    time_minutes = serializers.IntegerField(allow_null=True, help_text="Time limit to ask for, minutes")
    time = serializers.CharField(allow_null=True, help_text="The same as `--time`'s [D-]HH:MM:SS")
    hours = serializers.FloatField(allow_null=True, help_text="The same in hours (a session's)")
    summary = serializers.CharField(help_text="What the runs used, in words, as the composer shows it")
    advice = serializers.CharField(help_text="What to ask for, in words")


class SuggestedResourcesSerializer(serializers.Serializer):
    template = serializers.CharField(help_text="The job template's slug; empty for a profile")
    profile = serializers.CharField(help_text="The session profile; empty for a template")
    min_runs = serializers.IntegerField(help_text="Ended, measured runs a suggestion needs")
    suggestion = SuggestionSerializer(allow_null=True, help_text="null: too few runs (`detail` says)")
    detail = serializers.CharField(help_text="Why there is no suggestion; empty when there is one")
