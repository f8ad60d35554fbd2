"""The tile-level Argus DSL (`dsl=tile`): kernels import `lang` as `al`."""

from argus_core.hookspecs import hookimpl


@hookimpl
def argus_register_dsls():
    from argus_plugins.dsl.tile.frontend import TileFrontend

    return [TileFrontend()]
