from django.contrib import admin

from portal.policy.models import ResourceProfile


@admin.register(ResourceProfile)
class ResourceProfileAdmin(admin.ModelAdmin):
    list_display = ["title", "name", "partition", "gpus", "hours", "nodes", "groups", "order"]
    list_editable = ["order"]
