"""``python -m symbounds`` runs the command line."""

from .app.cli import entry

entry()
