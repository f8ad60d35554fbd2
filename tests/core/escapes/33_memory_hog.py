"""Escape attempt 33: memory hog."""

# ruff: noqa  (an attack written to be run, not to be tidy)
x = bytearray(64 << 30)
print("MEM-OK")
