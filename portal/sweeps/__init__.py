"""Hyperparameter sweeps: one job template run N times with varied script arguments, submitted as ONE
Slurm job array (`sbatch --array=0-(N-1)%K`); each task reads its own arguments by
SLURM_ARRAY_TASK_ID and logs one MLflow run (portal.tracking) tagged with the sweep and its index."""
