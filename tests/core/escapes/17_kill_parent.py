"""Escape attempt 17: kill parent."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os, signal

os.kill(PARENT_PID, signal.SIGKILL)
