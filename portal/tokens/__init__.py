"""Signed tokens that name one job or session, for what its Slurm job sends back: reports of its own
transitions and samples (report.py), and MLflow runs of its own (tracking.py)."""
