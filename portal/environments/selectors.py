"""Reads: which environments a user sees, and which one a name picks."""

from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.environments.models import Environment
from slurm.clusters import Cluster, Clusters

# What users may pick; Environment.usable says the same for one row.
_USABLE = Q(enabled=True, healthy=True)


def _visible(user: User) -> Q:
    """A container environment needs its image (portal.containers); one a user pulled is theirs alone."""
    return ~Q(kind=Environment.Kind.CONTAINER) | (Q(container_image__isnull=False) & (
        Q(container_image__owner__isnull=True) | Q(container_image__owner=user.pk)))


def environment_list(*, user: User) -> QuerySet[Environment]:
    """Admins see every environment, broken and switched-off ones too (with why); users only what
    they may pick."""
    environments = Environment.objects.all()
    return environments if user.is_staff else environments.filter(_USABLE & _visible(user))


def environment_choices(*, user: User, kernel_only: bool = False) -> QuerySet[Environment]:
    """What the forms offer, admins included: only usable environments (`kernel_only`: those a
    notebook server can use, i.e. with a Jupyter kernel or a container image it runs in)."""
    environments = Environment.objects.filter(_USABLE & _visible(user))
    if kernel_only:
        environments = environments.filter(Q(kind=Environment.Kind.PYTHON, kernel__gt="")
                                           | Q(kind=Environment.Kind.CONTAINER))
    return environments


def environment_get(*, user: User, name: str) -> Environment | None:
    """The usable environment called `name`, or None (unknown, switched off, broken: all refused alike)."""
    if not isinstance(name, str) or not name:
        return None
    return environment_choices(user=user).filter(name=name).first()


def environment_refusal(environment: Environment, cluster: Cluster) -> str:
    """Why `cluster` does not run `environment` (its cluster file offers neither it nor, for a
    container, its runtime), or ''."""
    if refused := cluster.refusal("environment", environment.name):
        return refused
    if environment.kind != Environment.Kind.CONTAINER:
        return ""
    image = getattr(environment, "container_image", None)  # None: the environment's image is gone
    return cluster.refusal("runtime", image.runtime) if image is not None else ""


def clusters_offering(clusters: Clusters, environment: Environment) -> str:
    """The names of the clusters that offer `environment`, space-separated (a form's data-clusters)."""
    return " ".join(cluster.name for cluster in clusters.all if not environment_refusal(environment, cluster))
