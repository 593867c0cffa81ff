"""The constructions: one folder per paper, and the one registry that the command line, the
certificate checker and the catalogue test read.

A new construction is a folder holding a :class:`~symbounds.core.paper.Paper` and one line here
(docs/adding-a-construction.md).
"""

from __future__ import annotations

from ..core.bound import rebuild as _model_rebuild
from ..core.certificate import CertificateError
from ..core.certificate import check_certificate as _check
from ..core.paper import Paper
from .alcalde.paper import PAPER as _ALCALDE
from .shi_liao.class_certificate import CLASS_FORMAT, check_class_certificate
from .shi_liao.paper import PAPER as _SHI_LIAO

#: key -> :class:`~symbounds.core.paper.Paper`
CATALOGUE: dict[str, Paper] = {p.key: p for p in (_SHI_LIAO, _ALCALDE)}

__all__ = ["CATALOGUE", "check_certificate"]


def check_certificate(cert: dict, prec: int | None = None, progress=None) -> dict:
    """Re-verify a certificate with the construction it names (``construction`` field)."""
    key = cert.get("construction") if isinstance(cert, dict) else None
    if isinstance(cert, dict) and cert.get("format") == CLASS_FORMAT:  # every target of a Hoelder class
        return check_class_certificate(cert, progress)
    if key == "model":  # a user's network: the embedded model is the network, no grid assumptions
        return _check(cert, _model_rebuild, prec, progress)
    paper = CATALOGUE.get(key) if isinstance(key, str) else None
    if paper is None or paper.rebuild is None:
        raise CertificateError(f"unknown construction {str(key)[:40]!r}: not one whose certificates can be checked")
    return _check(cert, paper.rebuild, prec, progress)
