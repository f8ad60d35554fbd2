"""Escape attempt 34: disk fill."""

# ruff: noqa  (an attack written to be run, not to be tidy)
f = open("/tmp/fill", "wb")
for _ in range(2048):
    f.write(b"0" * (1 << 20))
f.close()
print("DISK-OK")
