"""JupyterHub side of the portal: the Slurm spawner (`slurm_spawner`, which names the modules of its
concerns) and the hub's config. Plain Python: the hub imports no Django or Celery."""
