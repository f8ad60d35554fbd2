"""Escape attempt 15: walk for secrets."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

for top in ("/work", "/root", "/home", "/tmp", "/etc", "/var"):
    for d, _, fs in os.walk(top):
        for f in fs:
            try:
                t = open(os.path.join(d, f), "rb").read(1 << 16)
            except Exception:
                continue
            if b"argus-secret" in t:
                print(d, f, t)
