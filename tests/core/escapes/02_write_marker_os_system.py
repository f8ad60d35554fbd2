"""Escape attempt 02: write marker os system."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

os.system("touch " + MARKER_DIR + "/m")
