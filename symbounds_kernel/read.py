"""Reading a certificate: a bounded read of a regular file, strict JSON, exact numbers.

Every number of a certificate is a string: exact (``"3"``, ``"-7/8"``) or, for model weights, a
decimal (``"0.125"``, ``"4.8e-10"``); both become ``Fraction`` values from their digits.  JSON
floats, NaN/Infinity, duplicate keys and over-long or over-large numbers are refused.
"""

import json
import os
import re
import stat
from fractions import Fraction

LIMIT = 256 << 20  # bytes of a certificate file
_EXACT = re.compile(r"-?[0-9]{1,4000}(/[0-9]{1,4000})?")
_DECIMAL = re.compile(r"-?[0-9]{1,4000}(\.[0-9]{1,4000})?([eE][-+]?[0-9]{1,4})?")


class Unreadable(Exception):
    """Not a certificate file at all: missing, not regular, too large, not JSON."""


class Rejected(Exception):
    """A certificate that does not check out (one line naming the reason)."""


def read_json(path: str):
    """At most LIMIT + 1 bytes of the regular file ``path``, parsed as strict JSON."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise Unreadable(f"{path}: {e.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Unreadable(f"{path}: not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(LIMIT + 1)
    except OSError as e:
        raise Unreadable(f"{path}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > LIMIT:
        raise Unreadable(f"{path}: larger than {LIMIT} bytes")
    try:
        return json.loads(data.decode("utf-8"), parse_float=_refuse, parse_constant=_refuse,
                          object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        raise Unreadable(f"{path}: not JSON of a certificate ({str(e).splitlines()[0][:80]})") from None


def _refuse(text):
    raise ValueError(f"the JSON number {text[:20]} is not a string")


def _no_duplicates(pairs):
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("a duplicate key")
    return out


def number(text, what: str, exact: bool = False) -> Fraction:
    """The exact value of a number string (``exact``: only ``p`` or ``p/q``)."""
    if not isinstance(text, str) or not (_EXACT.fullmatch(text) or (not exact and _DECIMAL.fullmatch(text))):
        raise Rejected(f"{what}: {str(text)[:30]!r} is not a {'rational' if exact else 'number'} string")
    p, _, q = text.partition("/")
    if q and int(q) == 0:
        raise Rejected(f"{what}: a zero denominator")
    return Fraction(int(p), int(q)) if q else Fraction(text)
