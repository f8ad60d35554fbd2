"""Escape attempt 10: truncate store."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

os.truncate(STORE_FILE, 0)
