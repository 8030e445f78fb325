"""JupyterHub side of the portal: the Slurm spawner (`slurm_spawner`) and the hub's config."""
