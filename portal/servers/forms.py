from django import forms
from django.conf import settings

from portal.accounts.models import User
from portal.cluster.models import Partition
from portal.environments.models import Environment
from portal.environments.selectors import environment_choices


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
    environment = forms.ChoiceField(choices=(), required=False, label="Software environment",
                                    help_text="Its kernel is the default for new notebooks, its programs "
                                              "come first in terminals; the other kernels stay available.")

    def __init__(self, *args: object, user: User | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        environments = environment_choices(user=user, kernel_only=True)
        self.fields["environment"].choices = [("", "None (Python 3, R and every kernel, no default)")] + [
            (e.name, _environment_label(e)) for e in environments]
        partitions = list(Partition.objects.prefetch_related("gpus"))
        self.fields["partition"].choices = [(p.name, _label(p)) for p in partitions]
        self.fields["partition"].initial = next((p.name for p in partitions if p.is_default), None)


def _environment_label(environment: Environment) -> str:
    return f"{environment.title} — {environment.versions}" if environment.versions else environment.title


def _label(partition: Partition) -> str:
    gpus = sum(gpu.total for gpu in partition.gpus.all())
    limit = "no time limit" if partition.max_time is None else (
        f"at most {partition.max_time.total_seconds() / 3600:g} h")
    return f"{partition.name} ({gpus} GPUs, {limit})"
