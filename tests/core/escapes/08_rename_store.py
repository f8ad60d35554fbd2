"""Escape attempt 08: rename store."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

os.rename(STORE_FILE, STORE_FILE + ".gone")
