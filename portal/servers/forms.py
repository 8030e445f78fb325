from django import forms
from django.conf import settings

from portal.cluster.models import Partition


class ServerStartForm(forms.Form):
    """The instance options; the rules live in services.server_options_clean (shared with the API)."""

    name = forms.CharField(max_length=30, initial="my-server",
                           help_text="Lowercase letters, digits and hyphens.")
    partition = forms.ChoiceField(choices=())
    gpus = forms.IntegerField(label="GPUs", initial=1, min_value=0, max_value=1024)
    hours = forms.FloatField(label="Session time (hours)", required=False, min_value=0,
                             max_value=settings.SITE_MAX_WALLTIME_MINUTES / 60,
                             help_text="Default 8 h, at most the partition's limit.")
    nodes = forms.IntegerField(initial=1, min_value=1, max_value=1024)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        partitions = list(Partition.objects.prefetch_related("gpus"))
        self.fields["partition"].choices = [(p.name, _label(p)) for p in partitions]
        self.fields["partition"].initial = next((p.name for p in partitions if p.is_default), None)


def _label(partition: Partition) -> str:
    gpus = sum(gpu.total for gpu in partition.gpus.all())
    limit = "no time limit" if partition.max_time is None else (
        f"at most {partition.max_time.total_seconds() / 3600:g} h")
    return f"{partition.name} ({gpus} GPUs, {limit})"
