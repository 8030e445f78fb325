"""The local cluster's shape as Slurm itself reports it, so tests never assume a node count or name."""

import subprocess

from slurm.parsing import parse_gres


def gpu_nodes(partition: str = "gpu") -> dict[str, int]:
    """Node name -> GPU count of every node in `partition`, from sinfo."""
    out = subprocess.run(["sinfo", "-h", "-N", "-p", partition, "-o", "%N %G"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    nodes = {}
    for line in out.splitlines():
        name, gres = line.split(maxsplit=1)
        nodes[name] = sum(parse_gres(gres).values())
    return nodes
