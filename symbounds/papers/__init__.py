"""One module per paper: its constants (SymPy), its construction (weights) and its claims.

``CATALOGUE`` maps a short key to the module, written out by hand (no registration magic).
"""

from . import alcalde, shi_liao

CATALOGUE = {
    "shi_liao": shi_liao,
    "alcalde": alcalde,
}

__all__ = ["CATALOGUE", "alcalde", "shi_liao"]
