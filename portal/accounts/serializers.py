from rest_framework import serializers

from portal.accounts.models import ApiToken, User
from portal.core import fields


class MeSerializer(serializers.ModelSerializer):
    is_admin = serializers.BooleanField(source="is_staff")
    groups = serializers.ListField(source="ldap_groups", child=serializers.CharField())

    class Meta:
        model = User
        fields = ["username", "first_name", "last_name", "email", "uid_number", "gid_number",
                  "home_directory", "groups", "is_admin"]


class TokenObtainInputSerializer(serializers.Serializer):
    username = fields.CharField(max_length=64)
    password = fields.CharField(max_length=1024, trim_whitespace=False)
    name = fields.CharField(max_length=100, required=False, default="api")


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "created_at", "last_used_at"]


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(help_text="The key; shown only in this response.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
