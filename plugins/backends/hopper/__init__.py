"""NVIDIA Hopper backends: `backend=h100` and `backend=h200` (sm_90)."""

from argus_core.hookspecs import hookimpl


@hookimpl
def argus_register_backends():
    from argus_plugins.backends.hopper.backend import backends

    return backends()
