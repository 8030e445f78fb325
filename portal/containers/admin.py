from django import forms
from django.contrib import admin

from portal.containers.models import Image, Pull, RegistryCredential
from portal.containers.services import image_check, image_environment_sync


class ImageForm(forms.ModelForm):
    class Meta:
        model = Image
        fields = ["name", "title", "runtime", "reference", "frameworks", "description"]

    def clean(self) -> dict:
        data = super().clean()
        for field, messages in image_check(
            name=data.get("name", ""), runtime=data.get("runtime", ""), reference=data.get("reference", "")
        ).items():
            self.add_error(field, messages)
        return data


@admin.register(Image)
class ImageAdmin(admin.ModelAdmin):
    form = ImageForm
    list_display = ["name", "runtime", "reference", "owner", "environment"]
    list_filter = ["runtime"]

    def get_queryset(self, request):  # noqa: ANN001, ANN201 (Django's signature)
        return super().get_queryset(request).select_related("owner", "environment")

    def save_model(self, request, obj, form, change) -> None:  # noqa: ANN001
        super().save_model(request, obj, form, change)
        image_environment_sync(image=obj)


@admin.register(Pull)
class PullAdmin(admin.ModelAdmin):
    list_display = ["id", "image", "user", "state", "cluster", "slurm_job_id", "created"]
    readonly_fields = [f.name for f in Pull._meta.fields]


@admin.register(RegistryCredential)
class RegistryCredentialAdmin(admin.ModelAdmin):
    """Which users hold a key for which registry; the key itself is never shown."""

    list_display = ["user", "registry", "username", "updated"]
    fields = ["user", "registry", "username", "updated"]
    readonly_fields = fields

    def has_add_permission(self, request) -> bool:  # noqa: ANN001
        return False
