"""Options of the `backend` config group shipped by this plugin."""
