"""Escape attempt 27: dns and internet."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import socket

socket.getaddrinfo("pypi.org", 443)
s = socket.create_connection(("1.1.1.1", 53), timeout=2)
print("NET-OK")
