"""Escape attempt 04: write host tmp."""

# ruff: noqa  (an attack written to be run, not to be tidy)
open("/tmp/argus-escape-" + TOKEN, "w").write("escaped")
import os

os.link("/tmp/argus-escape-" + TOKEN, MARKER_DIR + "/hard")
