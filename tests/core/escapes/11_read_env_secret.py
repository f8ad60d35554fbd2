"""Escape attempt 11: read env secret."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

print({k: v for k, v in os.environ.items()})
