"""Escape attempt 31: cpu spin forever."""

# ruff: noqa  (an attack written to be run, not to be tidy)
while True:
    pass
