"""Options of the `planner` config group, one YAML file per option."""
