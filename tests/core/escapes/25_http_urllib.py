"""Escape attempt 25: http urllib."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import urllib.request

print("NET-OK", urllib.request.urlopen("http://127.0.0.1:%d/" % PORT, timeout=2).read())
