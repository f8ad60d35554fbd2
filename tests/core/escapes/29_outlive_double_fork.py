"""Escape attempt 29: outlive double fork."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os, time

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sh", ["sh", "-c", "sleep 3; touch " + MARKER_DIR + "/late; sleep 60 # " + TOKEN])
    os._exit(0)
time.sleep(0.2)
