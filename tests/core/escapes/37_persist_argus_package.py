"""Escape attempt 37: persist argus package."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import argus_core, os

open(os.path.join(os.path.dirname(argus_core.__file__), "escape_" + TOKEN + ".py"), "w").write("x")
