"""Escape attempt 32: fork bomb."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os, time

for _ in range(5000):
    try:
        if os.fork() == 0:
            os.execvp("sleep", ["sleep", "60", TOKEN])
    except OSError as e:
        print("fork refused", e)
        break
print("forks done")
