"""Escape attempt 14: read secret file."""

# ruff: noqa  (an attack written to be run, not to be tidy)
print(open(SECRET_FILE).read())
