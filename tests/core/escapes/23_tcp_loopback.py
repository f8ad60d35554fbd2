"""Escape attempt 23: tcp loopback."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import socket

s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
s.sendall(b"escaped")
print("NET-OK")
