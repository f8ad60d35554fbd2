"""Options of the `kernel` config group, one YAML file per option."""
