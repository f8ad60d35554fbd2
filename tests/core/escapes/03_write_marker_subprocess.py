"""Escape attempt 03: write marker subprocess."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import subprocess

subprocess.run(["sh", "-c", "echo x > " + MARKER_DIR + "/m"])
