"""Options of the `llm` config group, one YAML file per option."""
