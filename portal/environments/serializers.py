from rest_framework import serializers

from portal.environments.models import Environment


class EnvironmentSerializer(serializers.ModelSerializer):
    frameworks = serializers.DictField(child=serializers.CharField(),
                                       help_text="Detected by the health check: name -> version")
    healthy = serializers.BooleanField(help_text="Passed its last health check (users see only healthy ones)")
    health_message = serializers.CharField(help_text="Why the last check failed; empty when healthy")

    class Meta:
        model = Environment
        fields = ["name", "title", "kind", "frameworks", "description", "kernel", "healthy",
                  "health_message", "enabled", "checked_at"]
