import math

from rest_framework import serializers

from portal.core import fields
from portal.extensions.models import ExtensionRequest
from portal.extensions.services import MAX_EXTRA_MINUTES


class ExtendInputSerializer(serializers.Serializer):
    """Exactly one of `minutes` or `hours` (rounded up to whole minutes)."""

    minutes = fields.IntegerField(required=False, min_value=1, max_value=MAX_EXTRA_MINUTES,
                                  help_text="Extra minutes to add to the time limit")
    hours = fields.FloatField(required=False, min_value=1 / 60, max_value=MAX_EXTRA_MINUTES / 60,
                              help_text="Extra hours, instead of minutes")

    def validate(self, attrs: dict) -> dict:
        unknown = sorted(set(self.initial_data) - set(self.fields)) if isinstance(self.initial_data, dict) \
            else []
        if unknown:
            raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        if ("minutes" in attrs) == ("hours" in attrs):
            raise serializers.ValidationError({"minutes": ["Give either minutes or hours."]})
        if "hours" in attrs:
            attrs["minutes"] = math.ceil(round(attrs.pop("hours") * 60, 6))
        return attrs


class ExtensionSerializer(serializers.ModelSerializer):
    state = serializers.ChoiceField(choices=ExtensionRequest.State.choices)
    target = serializers.ChoiceField(choices=ExtensionRequest.Target.choices)

    class Meta:
        model = ExtensionRequest
        fields = ["id", "target", "target_name", "slurm_job_id", "minutes", "limit_before_minutes",
                  "limit_after_minutes", "cap_minutes", "state", "reason", "created_at", "decided_at"]
        read_only_fields = fields
