"""Budgets per cluster (#38) with Slurm recorded (tests/projects/test_sync_guard.py's RecordingSlurm):
each configured cluster gets its own budget through its own adapter, one that does not answer holds up
no other, each cluster's usage lands on its own rows, and the pages, CSV and admin show them by title.
On the bed: tests/projects/test_cluster_budgets_real.py."""

from datetime import date
from io import StringIO

import pytest
from django.contrib.admin import site
from django.core.management import CommandError, call_command
from django.utils import timezone

from portal.accounts.ldap import GroupMembers
from portal.projects import services
from portal.projects.admin import ClusterBudgetForm, ProjectAdmin
from portal.projects.models import Project, ProjectClusterBudget
from portal.projects.selectors import budgets_shown
from portal.projects.services import projects_sync_clusters, projects_usage_refresh
from slurm.errors import SlurmUnreachable
from tests.clusters import clusters_dir
from tests.factories import UserFactory
from tests.projects.test_sync_guard import RecordingSlurm

pytestmark = pytest.mark.django_db

B = "cluster-b"


@pytest.fixture
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@pytest.fixture
def project(monkeypatch):
    monkeypatch.setattr(services, "group_members",
                        lambda group: GroupMembers(usernames=frozenset({"alice"}), unresolved=()))
    return Project.objects.create(name="vision", ldap_group="vision", slurm_account="vision",
                                  budget_gpu_hours=20)


def _adapters(monkeypatch, **clusters: RecordingSlurm) -> None:
    monkeypatch.setattr(services.Slurm, "from_settings", classmethod(lambda cls, name=None: clusters[name]))


def test_each_cluster_gets_its_own_budget_through_its_own_adapter(two_clusters, project, monkeypatch):
    ProjectClusterBudget.objects.create(project=project, cluster=B, gpu_hours=3)
    default, other = RecordingSlurm({"vision": {"alice"}}), RecordingSlurm({"vision": {"alice"}})
    _adapters(monkeypatch, gpuportal=default, **{B: other})
    reports = projects_sync_clusters()
    assert list(reports) == ["gpuportal", B]  # the default cluster first
    assert default.calls == [("budget", "vision", 1200)] and other.calls == [("budget", "vision", 180)]
    # No row on a cluster: no budget there (a limit set by hand is removed).
    ProjectClusterBudget.objects.all().delete()
    default.calls, other.calls = [], []
    projects_sync_clusters()
    assert default.calls == [("budget", "vision", 1200)] and other.calls == [("budget", "vision", None)]


def test_a_cluster_that_does_not_answer_holds_up_no_other(two_clusters, project, monkeypatch):
    class Down(RecordingSlurm):
        def account_members(self, **kwargs):
            raise SlurmUnreachable("cluster-b: connection refused")

    default = RecordingSlurm({"vision": {"alice"}})
    _adapters(monkeypatch, gpuportal=default, **{B: Down({})})
    reports = projects_sync_clusters()
    assert reports[B].unreachable == "cluster-b: connection refused"
    assert default.calls == [("budget", "vision", 1200)] and reports["gpuportal"].unreachable == ""
    out = StringIO()
    with pytest.raises(CommandError, match="not applied: cluster-b: cluster-b: connection refused"):
        call_command("projects_sync", stdout=out)
    assert out.getvalue().startswith("gpuportal: accounts added: []")


def test_another_clusters_usage_lands_on_its_rows_and_the_pages_show_each_by_title(two_clusters, project,
                                                                                   client):
    now = timezone.now()
    projects_usage_refresh(slurm=RecordingSlurm({}), now=now, cluster=B)  # limit 600, used 0
    row = ProjectClusterBudget.objects.get(project=project, cluster=B)
    assert (row.gpu_hours, row.slurm_limit_gpu_minutes, row.used_gpu_minutes) == (None, 600, 0)
    project.refresh_from_db()
    assert project.usage_checked_at is None and not project.usage_days.exists()  # the default's alone

    admin = UserFactory(username="root-admin", is_staff=True)
    shown = budgets_shown(user=admin, today=date.today())
    assert [(b.cluster, b.cluster_title, b.limit_hours) for b in shown] == [
        ("gpuportal", "GPU cluster", 20.0), (B, "Cluster B", 10.0)]
    client.force_login(admin)
    rows = client.get("/projects/budgets.csv").content.decode().splitlines()
    assert rows[0].endswith(",cluster") and rows[2].startswith("vision,") and rows[2].endswith(f",{B}")


def test_one_cluster_shows_no_cluster_and_the_admin_no_other_budgets(project, client, rf):
    admin = UserFactory(username="root-admin", is_staff=True, is_superuser=True)
    (budget,) = budgets_shown(user=admin, today=date.today())
    assert (budget.cluster, budget.cluster_title) == ("", "")
    client.force_login(admin)
    assert client.get("/projects/budgets.csv").content.decode().splitlines()[0].endswith(",checked_at")
    request = rf.get("/")
    request.user = admin
    assert ProjectAdmin(Project, site).get_inline_instances(request, project) == []


def test_the_admin_offers_the_other_clusters_and_refuses_a_name_none_has(two_clusters, project, client):
    form = ClusterBudgetForm(data={"cluster": "nowhere", "gpu_hours": 5})
    assert not form.is_valid() and "cluster" in form.errors
    assert [value for value, _ in ClusterBudgetForm().fields["cluster"].choices] == [B]
    client.force_login(UserFactory(username="root-admin", is_staff=True, is_superuser=True))
    page = client.get(f"/admin/projects/project/{project.pk}/change/")
    assert page.status_code == 200 and "Budget on another cluster" in page.content.decode()
    assert "On the default cluster, GPU cluster; the others' below." in page.content.decode()
