"""Command-line front end: argument parsing and renderers."""
