"""The package version (kept in core so that every layer can record it in the files it writes)."""

__version__ = "0.2.0"
