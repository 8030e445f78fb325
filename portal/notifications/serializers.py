from rest_framework import serializers

from portal.core import fields


class PreferenceSerializer(serializers.Serializer):
    email_on_job_end = fields.BooleanField(help_text="E-mail me when a job ends (default for new jobs)")
    email = serializers.EmailField(read_only=True,
                                   help_text="Where it goes: your directory entry's mail; empty: none")

    def validate(self, attrs: dict) -> dict:
        writable = {name for name, field in self.fields.items() if not field.read_only}
        unknown = sorted(set(self.initial_data) - writable) if isinstance(self.initial_data, dict) else []
        if unknown:
            raise serializers.ValidationError({key: ["Unknown or read-only field."] for key in unknown})
        return attrs
