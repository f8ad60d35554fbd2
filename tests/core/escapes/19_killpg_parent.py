"""Escape attempt 19: killpg parent."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os, signal

os.killpg(os.getpgid(PARENT_PID), signal.SIGKILL)
