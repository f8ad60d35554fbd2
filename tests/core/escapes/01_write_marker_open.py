"""Escape attempt 01: write marker open."""

# ruff: noqa  (an attack written to be run, not to be tidy)
open(MARKER_DIR + "/m", "w").write("escaped")
