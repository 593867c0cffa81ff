"""An independent checker of symbounds certificates, small enough to audit (docs/checking.md).

It shares no code with the prover: it reads the certificate with the standard library, parses the
model and the target itself, checks the cover of the cube in exact rationals and re-bounds every
box with its own first-order Taylor models on python-flint's Arb balls.

``check_file(path)`` returns ``(accepted, reason)``; ``python -m symbounds_kernel CERT.json`` exits
0 (accepted), 1 (rejected) or 2 (unreadable).
"""

from .property import FORMAT as PROPERTY_FORMAT, check_property
from .read import Rejected, Unreadable, read_json
from .verify import check

__all__ = ["Rejected", "Unreadable", "check", "check_file", "read_json"]


def check_file(path: str, progress=None, workers: int = 1) -> tuple[bool, str]:
    """``(True, summary)`` or ``(False, reason)``; :class:`Unreadable` if it is no certificate file.
    ``workers`` processes share the boxes of a ``symbounds-certificate/1``."""
    cert = read_json(path)
    try:
        if isinstance(cert, dict) and cert.get("format") == PROPERTY_FORMAT:
            return True, check_property(cert, progress)
        return True, check(cert, progress, workers=workers)
    except Rejected as e:
        return False, str(e)
    except (ArithmeticError, ValueError, TypeError, RecursionError) as e:
        return False, f"{type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''}"
