"""The `tune` command line: one module per command group, composed in main.py."""
