"""Argus presets of Hydra's own config groups (`hydra/launcher=argus_slurm`)."""
