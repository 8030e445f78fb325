from django.contrib import admin

from portal.tensorboards.models import TensorBoard


@admin.register(TensorBoard)
class TensorBoardAdmin(admin.ModelAdmin):
    list_display = ["id", "user", "state", "logdir", "slurm_job_id", "host", "port", "created_at", "ended_at"]
    list_filter = ["state"]
    search_fields = ["user__username", "logdir", "slurm_job_id"]
    readonly_fields = [field.name for field in TensorBoard._meta.fields]
