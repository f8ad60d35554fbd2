"""Launcher presets: `hydra/launcher=argus_slurm` (hydra-submitit-launcher)."""
