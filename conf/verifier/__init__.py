"""Options of the `verifier` config group, one YAML file per option."""
