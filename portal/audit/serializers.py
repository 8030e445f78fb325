from rest_framework import serializers

from portal.core.audit_context import SOURCES


class ActivitySerializer(serializers.Serializer):
    id = serializers.CharField(help_text="Unique across the trail, e.g. audit.JobEvent:12")
    at = serializers.DateTimeField()
    action = serializers.CharField(help_text="create, update, delete; a login's: create")
    object_type = serializers.CharField(help_text="e.g. jobs.Job, servers.Session, audit.Login")
    object_id = serializers.CharField(allow_null=True)
    actor = serializers.CharField(allow_null=True, help_text="Who acted; null: the portal itself")
    acting_as = serializers.CharField(allow_null=True, help_text="session, token <prefix>, or a task")
    source = serializers.ChoiceField(choices=[*SOURCES, "system"])
    address = serializers.CharField(allow_null=True, help_text="The client's address")
    data = serializers.DictField(help_text="The object's recorded fields after the change")
    changes = serializers.DictField(allow_null=True, help_text="field: [before, after]")
