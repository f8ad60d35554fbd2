"""Escape attempt 06: rmtree store dir."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os, shutil

shutil.rmtree(os.path.dirname(STORE_FILE))
