"""Escape attempt 38: write etc cron."""

# ruff: noqa  (an attack written to be run, not to be tidy)
open("/etc/cron.d/argus-" + TOKEN, "w").write("* * * * * root touch " + MARKER_DIR + "/cron")
