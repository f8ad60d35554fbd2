"""Escape attempt 09: chmod store."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

os.chmod(STORE_FILE, 0)
