"""Startup check: the cluster files of CLUSTERS_DIR (slurm/clusters.py) load, or `check` names the
file and the field that do not."""

from django.core import checks
from django.core.exceptions import ImproperlyConfigured

from slurm.clusters import clusters_from_settings


@checks.register("cluster")
def clusters_check(app_configs: object = None, **kwargs: object) -> list[checks.CheckMessage]:
    try:
        clusters_from_settings()
    except ImproperlyConfigured as error:
        return [checks.Error(str(error), id="cluster.E001")]
    return []
