"""Options of the `dsl` config group, one YAML file per option."""
