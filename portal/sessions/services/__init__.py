"""Notebook sessions' services: start, stop, and what the hub and Slurm say of them."""
