"""Options of the `kernel` config group shipped by this plugin."""
