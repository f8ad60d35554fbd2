"""Escape attempt 05: delete store."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

os.unlink(STORE_FILE)
