"""Config options this plugin adds to Argus's groups (found through hydra.searchpath)."""
