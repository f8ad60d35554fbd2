"""Options of the `backend` config group, one YAML file per option."""
