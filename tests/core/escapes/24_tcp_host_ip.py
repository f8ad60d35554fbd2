"""Escape attempt 24: tcp host ip."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import socket

s = socket.create_connection((HOST_IP, PORT), timeout=2)
s.sendall(b"escaped")
print("NET-OK")
