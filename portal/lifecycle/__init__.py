"""The lifecycle every piece of the portal's Slurm work follows (work.py): saved first, claimed with a
lease, submitted once, found by its UUID comment, fenced, retried, reconciled and cancelled when ended."""
