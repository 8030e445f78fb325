from rest_framework import serializers

from portal.core import fields
from portal.launches.models import Preset


class PresetSerializer(serializers.ModelSerializer):
    kind = serializers.ChoiceField(choices=Preset.Kind.choices)

    class Meta:
        model = Preset
        fields = ["id", "kind", "name", "template", "values", "created_at"]
        read_only_fields = fields


class PresetCreateSerializer(serializers.Serializer):
    """The values are checked by the service (server options, or the template's parameters)."""

    kind = serializers.ChoiceField(choices=Preset.Kind.choices)
    name = fields.CharField(max_length=64, help_text="Saving a name again replaces its values")
    template = fields.CharField(max_length=64, required=False, default="",
                                     help_text="The job template (kind job)")
    values = serializers.JSONField(help_text="Server options (partition, gpus, hours, nodes, environment) "
                                             "or the template's parameters")

    def validate(self, attrs: dict) -> dict:
        unknown = sorted(set(self.initial_data) - set(self.fields)) if isinstance(self.initial_data, dict) \
            else []
        if unknown:
            raise serializers.ValidationError({key: ["Unknown field."] for key in unknown})
        return attrs


class PresetFilterSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=Preset.Kind.choices, required=False)
    template = serializers.CharField(max_length=64, required=False)
