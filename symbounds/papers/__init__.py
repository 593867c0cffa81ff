"""One module per paper: its constants (SymPy), its construction (weights) and its claims.

``CATALOGUE`` maps a short key to the module, written out by hand (no registration magic).
"""

from . import shi_liao

CATALOGUE = {
    "shi_liao": shi_liao,
}

__all__ = ["CATALOGUE", "shi_liao"]
