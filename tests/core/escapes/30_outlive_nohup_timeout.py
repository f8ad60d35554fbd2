"""Escape attempt 30: outlive nohup timeout."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os, time

os.system(
    'nohup sh -c "sleep 3; touch '
    + MARKER_DIR
    + "/late; sleep 60 # "
    + TOKEN
    + '" >/dev/null 2>&1 &'
)
while True:
    time.sleep(1)
