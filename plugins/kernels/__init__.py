"""Built-in kernel families, one plugin per sub-package (named as its `kernel=` option):
`gemm`, `attention`, `moe` and `kernelbench`. Each registers its family with
`argus_register_kernels`; `argus_core.plugin_manager.BUILTIN_PLUGINS` lists them by name.

A family's `kernel.py` is DSL code: it imports the language it is written in
(`argus_plugins.dsl.tile.lang`), the one plugin module other plugins may name.
"""
