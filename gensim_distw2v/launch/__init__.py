"""Launchers: a cluster started with one command on SSH hosts or in a SLURM allocation."""
