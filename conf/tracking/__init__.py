"""Options of the `tracking` config group, one YAML file per option."""
