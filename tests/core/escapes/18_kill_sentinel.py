"""Escape attempt 18: kill sentinel."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os, signal

os.kill(SENTINEL_PID, signal.SIGKILL)
