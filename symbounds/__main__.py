"""``python -m symbounds`` runs the command line."""

from .cli import entry

entry()
