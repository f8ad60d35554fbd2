"""Escape attempt 21: kill ctypes."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import ctypes

libc = ctypes.CDLL(None)
print(libc.kill(SENTINEL_PID, 9), libc.kill(PARENT_PID, 15))
