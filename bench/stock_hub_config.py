"""The hub config with stock batchspawner.SlurmSpawner and the same resources (bench/spawn_latency.py)."""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (provided by JupyterHub)
load_subconfig(str(Path(__file__).resolve().parents[1] / "spawners/jupyterhub_config.py"))  # noqa: F821

bin_dir = os.environ.get("SLURM_BIN_DIR", "/usr/bin")
c.JupyterHub.spawner_class = "batchspawner.SlurmSpawner"
# As ours, the hub is unprivileged and may run exactly sbatch and scancel as the user
# (deploy/sudoers.d/gpuportal); squeue needs no user.
c.SlurmSpawner.exec_prefix = ""
c.SlurmSpawner.batchspawner_singleuser_cmd = f"{sys.prefix}/bin/batchspawner-singleuser"
c.SlurmSpawner.cmd = [f"{sys.prefix}/bin/jupyterhub-singleuser"]
c.SlurmSpawner.batch_submit_cmd = f"/usr/bin/sudo -E -n -u {{username}} -- {bin_dir}/sbatch --parsable"
c.SlurmSpawner.batch_query_cmd = f"{bin_dir}/squeue -h -j {{job_id}} -o '%T %B'"
c.SlurmSpawner.batch_cancel_cmd = f"/usr/bin/sudo -n -u {{username}} -- {bin_dir}/scancel {{job_id}}"
c.SlurmSpawner.state_exechost_exp = "127.0.0.1"
c.SlurmSpawner.req_partition = "gpu"
c.SlurmSpawner.req_runtime = "60"
c.SlurmSpawner.req_nprocs = "8"
c.SlurmSpawner.req_memory = "48G"
c.SlurmSpawner.req_gres = "gpu:1"
