"""The server's batch script: the template, its prologue, and what the server is started with.

The prologue is, in order: the site's lines (TensorBoard's proxy URL, the portal's URL, notebook
templates, the shared data link: the cluster's own where its file gives one), the cluster file's
`[spawner] prologue` lines, the job's reports to the portal (spawners.reports), then either a
container's runtime command (RUN, spawners.container_launch), which the server's command follows,
or the chosen software environment's bin/ first on PATH.
"""

import shlex
from pathlib import Path

from slurm.clusters import Cluster
from spawners.options import EnvironmentChoice

# Settings of the users' notebook servers (jupyter-server-proxy's TensorBoard): JUPYTER_CONFIG_PATH.
SINGLEUSER_CONFIG_DIR = Path(__file__).resolve().parent / "singleuser"

BATCH_SCRIPT = """#!/bin/bash
#SBATCH --job-name={{job_name}}
#SBATCH --output={{homedir}}/.jupyterhub-slurm-%j.log
#SBATCH --chdir={{homedir}}
#SBATCH --export={{keepvars}}
#SBATCH --partition={{partition}}
#SBATCH --time={{runtime}}
#SBATCH --nodes={{nodes}}
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task={{nprocs}}
#SBATCH --mem={{memory}}
{% if gres %}#SBATCH --gres={{gres}}
{% endif %}{% if account %}#SBATCH --account={{account}}
{% endif %}{% if comment %}#SBATCH --comment={{comment}}
{% endif %}
set -euo pipefail
{{prologue}}
{{cmd}}
"""


def site_prologue(*, portal_url: str, templates_dir: str, data_dir: str) -> str:
    """The site's lines of every server's script."""
    # `%tensorboard` in a notebook shows TensorBoard through this server's jupyter-server-proxy.
    lines = ['export TENSORBOARD_PROXY_URL="${JUPYTERHUB_SERVICE_PREFIX:-/}proxy/%PORT%/"']
    if portal_url:
        lines.append(f"export GPUPORTAL_URL={shlex.quote(portal_url)}")
    if templates_dir:
        source = shlex.quote(f"{templates_dir.rstrip('/')}/.")
        lines += ['mkdir -p "$HOME/templates"', f'cp -rn {source} "$HOME/templates/" || true']
    if data_dir:
        lines.append(_data_link(data_dir))
    return "\n".join(lines)


def _data_link(data_dir: str) -> str:
    return f'[ -e "$HOME/data" ] || ln -s {shlex.quote(data_dir)} "$HOME/data"'


def cluster_prologue(prologue: str, *, cluster: Cluster | None, site_data_dir: str) -> str:
    """The site's prologue on the server's cluster (#38): ~/data links to the cluster's own
    `data_dir`, and its file's `[spawner] prologue` lines (`module load ...`) follow."""
    if cluster is None:
        return prologue
    if cluster.data_dir and site_data_dir:
        prologue = prologue.replace(_data_link(site_data_dir), _data_link(cluster.data_dir))
    return "\n".join(line for line in (prologue, *cluster.spawner.prologue) if line)


def script_prologue(prologue: str, *, reports: str, run_prefix: str | None,
                    environment: EnvironmentChoice | None) -> str:
    """The whole prologue: the configured one, the reports, then in a container (`run_prefix`: the
    lines that set RUN) the runtime's command, else the environment's bin/ first on PATH (so
    terminals and `torchrun` find its programs)."""
    lines = [prologue, reports]
    if run_prefix is not None:
        lines.append(run_prefix)
    elif environment is not None:
        lines.append(f'export PATH={shlex.quote(environment.path + "/bin")}:"$PATH"')
    if environment is not None:
        lines.append(f"export GPUPORTAL_ENVIRONMENT={shlex.quote(environment.name)}")
    return "\n".join(line for line in lines if line)


def server_command(command: str, *, in_container: bool) -> str:
    """The server's command line, run by the container's runtime when there is one."""
    return f'"${{RUN[@]}}" {command}' if in_container else command


def default_kernel_args(environment: EnvironmentChoice | None) -> list[str]:
    """The chosen environment's kernel as JupyterLab's default for new notebooks (batchspawner puts
    these words into the script as they are: quoted here)."""
    if environment is None or not environment.kernel:
        return []
    return [shlex.quote(f"--MappingKernelManager.default_kernel_name={environment.kernel}")]
