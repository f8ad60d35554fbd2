"""Escape attempt 28: outlive setsid child."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import subprocess

subprocess.Popen(
    ["sh", "-c", "sleep 3; touch " + MARKER_DIR + "/late; sleep 60 # " + TOKEN],
    start_new_session=True,
)
