from typing import Any

from django import forms
from django.utils import timezone

from portal.accounts.models import User
from portal.environments.models import Environment
from portal.environments.selectors import clusters_offering, environment_choices
from portal.policy.rules import SERVER_NAME_RULE, PartitionRules, Policy
from portal.policy.services import partitions_offered
from portal.projects.selectors import budget_label, project_budget, user_projects
from slurm.clusters import clusters_from_settings


class ServerStartForm(forms.Form):
    """The instance options; every limit is the policy's (services.server_options_clean, shared with
    the API and the hub), so the fields check only their type here."""

    name = forms.CharField(max_length=30, initial="my-server", help_text=SERVER_NAME_RULE)
    profile = forms.CharField(required=False, max_length=30, widget=forms.HiddenInput)
    # Checked by the service (a configured cluster), like the API's; only where there is a choice.
    cluster = forms.CharField(label="Cluster", required=False, widget=forms.Select)
    # A select, but checked by the policy (its message, like the API's and the hub's), not Django's.
    partition = forms.CharField(required=False, widget=forms.Select)
    gpus = forms.IntegerField(label="GPUs per node", initial=1, required=False)
    hours = forms.FloatField(label="Session time (hours)", required=False,
                             help_text="Default 8 h, at most the partition's and your group's limit.")
    nodes = forms.IntegerField(initial=1, required=False)
    environment = forms.ChoiceField(choices=(), required=False, label="Software environment",
                                    help_text="Its kernel is the default for new notebooks, its programs "
                                              "come first in terminals; the other kernels stay available.")
    queue_timeout_minutes = forms.IntegerField(
        label="Cancel if still queued after (minutes)", required=False, min_value=1, max_value=7 * 24 * 60,
        help_text="Empty: wait as long as it takes.")
    # Checked by the service (a project the user is in), like the API's and the hub's.
    account = forms.CharField(
        label="Project", required=False, widget=forms.Select,
        help_text="Charged to this project's GPU-hour budget (sbatch --account); a project whose budget "
                  "is used up holds its jobs.")

    def __init__(self, *args: object, user: User | None = None, policy: Policy, groups: list[str],
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        environments = environment_choices(user=user, kernel_only=True)
        self.fields["environment"].choices = [("", "None (Python 3, R and every kernel, no default)")] + [
            (e.name, _environment_label(e)) for e in environments]
        rules = policy.rules_for(groups)
        partitions = [p for p in policy.partitions.values()
                      if rules.partitions is None or p.name in rules.partitions]
        self.fields["partition"].widget.choices = [(p.name, _label(p)) for p in partitions]
        self.fields["partition"].initial = policy.default_partition
        clusters = clusters_from_settings()
        if clusters.several:
            self.fields["cluster"].widget.choices = [(known.name, known.title) for known in clusters.all]
            self.fields["cluster"].initial = clusters.default.name
            # Each partition and environment lists the clusters offering it (core/cluster_offers.js):
            # those whose snapshot has it, whose file offers it and whose limits allow the user it.
            entries = partitions_offered(policy, clusters, groups)
            self.fields["partition"].widget = OfferedSelect(
                choices=[(p.name, _label(p)) for p, _ in entries], offered=[names for _, names in entries])
            self.fields["environment"].widget = OfferedSelect(
                choices=self.fields["environment"].choices,
                offered=[None] + [clusters_offering(clusters, e) for e in environments])
        else:  # a one-cluster site's form is as before #38
            del self.fields["cluster"]
        today = timezone.localdate()
        budgets = [project_budget(project=project, today=today)
                   for project in (user_projects(user=user) if user is not None else [])]
        if budgets:
            self.fields["account"].widget.choices = [("", "your default account")] + [
                (budget.project.slurm_account, budget_label(budget)) for budget in budgets]
        else:
            self.fields["account"].widget = forms.HiddenInput()


class OfferedSelect(forms.Select):
    """A select whose options name the clusters that offer them (data-clusters), one entry per
    choice in order (None: every cluster). Two options may share a value: a partition whose size
    differs between clusters is offered once per size."""

    def __init__(self, *, offered: list[str | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.offered = offered

    def create_option(self, name: str, value: Any, label: Any, selected: Any, index: int,
                      *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(name, value, label, selected, index, *args, **kwargs)
        if (clusters := self.offered[index]) is not None:
            option["attrs"]["data-clusters"] = clusters
        return option


def _environment_label(environment: Environment) -> str:
    return f"{environment.title} — {environment.versions}" if environment.versions else environment.title


def _label(partition: PartitionRules) -> str:
    return (f"{partition.name} ({partition.nodes} node(s), {partition.gpus_per_node} GPUs each, "
            f"at most {partition.max_hours:g} h)")
