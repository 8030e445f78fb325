"""Where the portal shares each cluster's squeue with the hub (#38). Plain Python, no Django: the
hub's spawner (spawners.slurm_spawner) reads the same names."""

from pathlib import Path


def queue_file_of(base: str, cluster: str = "") -> str:
    """The default cluster's queue file (`cluster` ''): `base`, the portal's SERVERS_QUEUE_FILE and the
    hub's GPUPORTAL_QUEUE_FILE; another cluster's lies beside it, named after the cluster."""
    if not base or not cluster:
        return base
    path = Path(base)
    return str(path.with_name(f"{path.stem}.{cluster}{path.suffix}"))
