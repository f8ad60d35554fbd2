"""Options of the `cache` config group (the result cache, argus_core.cache), one YAML file per option."""
