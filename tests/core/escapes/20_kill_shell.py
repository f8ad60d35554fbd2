"""Escape attempt 20: kill shell."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

os.system("kill -9 %d %d" % (PARENT_PID, SENTINEL_PID))
