"""Escape attempt 26: unix socket."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import socket

s = socket.socket(socket.AF_UNIX)
s.connect(UNIX_SOCK)
s.sendall(b"escaped")
print("NET-OK")
