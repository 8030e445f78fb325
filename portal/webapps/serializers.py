from typing import Any

from django.urls import reverse
from rest_framework import serializers

from portal.core import fields
from portal.jobs.job_templates import TemplateError
from portal.webapps.catalog import form_of
from portal.webapps.grants import app_url
from portal.webapps.models import App, AppType


class AppTypeSerializer(serializers.ModelSerializer):
    parameters = serializers.SerializerMethodField(help_text=(
        "JSON Schema of `parameters` for POST /api/v1/apps/ (the same field types as job templates)"))

    class Meta:
        model = AppType
        fields = ["slug", "name", "description", "parameters", "time_limit_minutes", "idle_minutes"]

    def get_parameters(self, app_type: AppType) -> dict[str, Any]:
        try:
            form = form_of(app_type)
        except TemplateError:
            form = ()
        return {"type": "object", "additionalProperties": False,
                "properties": {parameter.name: parameter.json_schema() for parameter in form},
                "required": [parameter.name for parameter in form if parameter.required]}


class AppStartInputSerializer(serializers.Serializer):
    type = fields.CharField(max_length=40, help_text="An app type's slug (GET /api/v1/app-types/)")
    parameters = serializers.DictField(required=False, default=dict, help_text=(
        "Its form's values, as the type's `parameters` schema says"))
    cluster = fields.CharField(
        max_length=40, required=False, allow_blank=True,
        help_text="The name of a configured cluster (its Slurm ClusterName); default: the default cluster")

    def validate(self, attrs: dict) -> dict:
        if unknown := sorted(set(self.initial_data) - set(self.fields)):
            raise serializers.ValidationError({key[:64]: ["Unknown field."] for key in unknown})
        return attrs


class AppSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="user.username")
    type = serializers.CharField(source="type.slug")
    type_name = serializers.CharField(source="type.name")
    session = serializers.CharField(source="session.name", allow_null=True, default=None)
    cluster = serializers.CharField(read_only=True, help_text=(
        "The cluster it runs on; its Slurm job id is that cluster's"))
    url = serializers.SerializerMethodField(help_text=(
        "Its own origin on the apps gateway; a browser gets in through `open_url`"))
    open_url = serializers.SerializerMethodField(help_text=(
        "The portal page that sends its owner's browser to `url` with a one-time grant"))

    class Meta:
        model = App
        fields = ["id", "uuid", "type", "type_name", "owner", "parameters", "job", "session", "state",
                  "reason", "cluster", "slurm_job_id", "host", "port", "time_limit_minutes", "idle_minutes",
                  "created_at", "submitted_at", "started_at", "ready_at", "ended_at", "last_access", "url",
                  "open_url"]

    def get_url(self, app: App) -> str:
        return app_url(app)

    def get_open_url(self, app: App) -> str:
        return reverse("webapps:open", args=[app.pk])


class ShellStartInputSerializer(serializers.Serializer):
    job = serializers.IntegerField(required=False, min_value=1, help_text=(
        "A running job of yours (its portal id): the shell runs inside its allocation "
        "(`srun --jobid … --overlap --pty`)"))
    session = fields.CharField(required=False, max_length=30, help_text=(
        "A running session of yours (its name): as `job`, in the session's allocation"))
    folder = fields.CharField(required=False, max_length=1024, help_text=(
        "The folder it starts in (absolute); default: your home"))

    def validate(self, attrs: dict) -> dict:
        if unknown := sorted(set(self.initial_data) - set(self.fields)):
            raise serializers.ValidationError({key[:64]: ["Unknown field."] for key in unknown})
        if "job" in attrs and "session" in attrs:
            raise serializers.ValidationError({"session": ["Give a job or a session, not both."]})
        return attrs


class ShellSerializer(serializers.ModelSerializer):
    owner = serializers.CharField(source="user.username")
    session = serializers.CharField(source="session.name", allow_null=True, default=None)
    folder = serializers.SerializerMethodField(help_text="The folder it started in; empty: the home")
    slurm_job_id = serializers.SerializerMethodField(help_text=(
        "The Slurm job whose allocation it runs in (a job shell); empty: the login host"))
    url = serializers.SerializerMethodField(help_text="Its own origin on the apps gateway")
    open_url = serializers.SerializerMethodField(help_text=(
        "The portal page that sends its owner's browser to `url` with a one-time grant"))

    class Meta:
        model = App
        fields = ["id", "uuid", "owner", "state", "reason", "job", "session", "slurm_job_id", "folder",
                  "idle_minutes", "created_at", "ready_at", "ended_at", "last_access", "url", "open_url"]

    def get_slurm_job_id(self, shell: App) -> str:
        return str(shell.parameters.get("slurm_job_id", ""))

    def get_folder(self, shell: App) -> str:
        return str(shell.parameters.get("folder", ""))

    def get_url(self, shell: App) -> str:
        return app_url(shell)

    def get_open_url(self, shell: App) -> str:
        return reverse("shells:open", args=[shell.pk])
