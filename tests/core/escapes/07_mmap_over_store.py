"""Escape attempt 07: mmap over store."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import mmap, os

fd = os.open(STORE_FILE, os.O_RDWR)
m = mmap.mmap(fd, 0)
m[:8] = b"XXXXXXXX"
m.flush()
