"""The only code in gpuportal that talks to Slurm (`slurm.adapter`), plus the dev cluster (`dev/`)."""
