"""Where a command's certificate goes, and the arguments every certifying command reads the same
way: ``--out`` checked before any work, a proved certificate never replaced by a weaker one,
``--box LO:HI,...``, ``--timeout`` and the words for why a search stopped.  (Shared by the model,
graph-target and class commands; it imports none of them.)
"""

from __future__ import annotations

import os
import sys

from ..core.certificate import beside, certificate_destination, write_certificate
from .args import UsageError, check_out_folders, number, written

def check_certificate_out(args) -> None:
    """Before any work: ``--out`` and, when a file is there already, the two files beside it that
    a refuted or undecided run would write instead of replacing a proved certificate."""
    if args.out is None:
        return
    paths = [args.out]
    if os.path.isfile(args.out) and not args.force:
        paths += [beside(args.out, v) for v in ("refuted", "undecided")]
    check_out_folders(*paths)


def _holds_proved_class_certificate(path: str) -> bool:
    """Does ``path`` hold a class certificate whose verdict is proved?  (Read, not re-checked.)"""
    from ..core.files import read_json_file
    from ..papers.shi_liao.class_certificate import CLASS_FORMAT

    if not os.path.isfile(path):
        return False
    try:
        held = read_json_file(path, ValueError)
    except (ValueError, OSError):
        return False
    return isinstance(held, dict) and held.get("format") == CLASS_FORMAT and held.get("verdict") == "proved"


def destination(path: str, verdict: str, force: bool = False) -> str:
    """:func:`~symbounds.core.certificate.certificate_destination` for either certificate format:
    a proved certificate at ``path`` (one target, or the Hoelder class of ``certify
    --holder-class``) is kept when this run is not proved and ``force`` is not given."""
    path_ = certificate_destination(path, verdict, force)
    if path_ == path and verdict != "proved" and not force and _holds_proved_class_certificate(path):
        return beside(path, verdict)
    return path_


def save_certificate(args, cert: dict, write=write_certificate) -> str:
    """Write the certificate of a run to ``--out`` with ``write(path, cert)``, keeping a proved
    certificate found there (of either format) when this one is not proved (unless ``--force``);
    returns the path written (named on stderr).  The write is atomic: no partial file."""
    path = destination(args.out, cert["verdict"], args.force)
    write(path, cert)
    if path != args.out:
        print(f"symbounds: {args.out} holds a proved certificate: kept (--force replaces it); "
              f"this {cert['verdict']} one is written beside it", file=sys.stderr)
    written(path)
    return path


def parse_box(text: str) -> tuple[list, list]:
    lo, hi = [], []
    for k, part in enumerate(text.split(",")):
        ends = part.split(":")
        if len(ends) != 2 or not ends[0].strip() or not ends[1].strip():
            raise UsageError(f"--box: interval {k} {part[:40]!r} is not LO:HI")
        a, b = number(ends[0], f"--box interval {k}"), number(ends[1], f"--box interval {k}")
        if a > b:
            raise UsageError(f"--box: interval {k} has LO > HI ({part[:40]})")
        lo.append(a)
        hi.append(b)
    return lo, hi


def timeout_seconds(text) -> float | None:
    """``--timeout SECONDS`` (positive, at most a week), or None."""
    if text is None:
        return None
    t = number(text, "--timeout")
    if not (0 < t <= 7 * 86400):
        raise UsageError(f"--timeout {text[:40]}: use a number of seconds in (0, 604800]")
    return float(t)


#: why a search ended undecided (``SearchResult.stopped``), in words
STOPPED = {"timeout": "the timeout", "max-boxes": "the box limit", "min-width": "the smallest box width",
           "leakage": "E above eps at a point where the worst target's error is not"}


def certificate_of_format(path: str, fmt: str) -> dict | None:
    """The file's JSON object when it is a certificate of format ``fmt`` (numbers as strings, as
    every certificate writes them), else None."""
    from ..core.certificate import CertificateError
    from ..core.files import read_json_file

    def no_float(text):
        raise CertificateError(f"JSON number {text!r}: numbers must be strings")

    try:
        obj = read_json_file(path, CertificateError, no_float, no_float)
    except CertificateError:
        return None
    return obj if isinstance(obj, dict) and obj.get("format") == fmt else None
