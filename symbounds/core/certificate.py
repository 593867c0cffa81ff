"""Certificate files: a whole-domain bound that someone else can re-check from scratch.

A certificate (format ``symbounds-certificate/1``, JSON, every number a string) records the claim
``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps``, the construction and instance it was built from, the
network as a model file with its SHA-256, every box with its certified bound, and the target's
grid checks.  :func:`check_certificate` re-derives all of it; the construction-specific part (the
network the recorded instance must give, and the target's assumptions) is asked of the
construction through a ``rebuild`` callable, so this module knows no paper.
"""

from __future__ import annotations

import json
import os
from fractions import Fraction

from .boxes import BATCH, Box, CertifyResult, box_bound, box_bounds, boxes_cover_cube, digest, float_evaluator
from .exact import decimal_down, decimal_up, parse_number
from .expr import parse_target
from .files import atomic_write, read_json_file
from .modelfile import ModelFileError, model_from_json

__all__ = [
    "CERT_FORMAT",
    "FIELDS",
    "MIN_CERT_PREC",
    "MODEL_PREC_RANGE",
    "CertificateError",
    "NotACertificate",
    "beside",
    "certificate_destination",
    "check_certificate",
    "holds_proved_certificate",
    "load_certificate",
    "make_certificate",
    "write_certificate",
]

CERT_FORMAT = "symbounds-certificate/1"

#: The top-level fields of a certificate, each with its JSON type; no other field is accepted.
FIELDS = {"format": str, "symbounds": str, "claim": str, "construction": str, "instance": dict, "d": int,
          "eps": str, "target": str, "prec": int, "model_prec": int, "model_sha256": str, "model": dict,
          "verdict": str, "max_bound": str, "boxes": list, "undecided_boxes": list,
          "counterexample": type(None), "assumptions": list, "seconds": str, "boxes_evaluated": int}
#: Box evaluations below float64's 53 bits cannot decide a box of the construction (its softmax
#: weights and indicator cancellations need more), so neither certify nor check accepts them.
MIN_CERT_PREC = 53
#: The precision at which the model's weights are written: checked before anything is rebuilt.
MODEL_PREC_RANGE = (24, 4096)


class CertificateError(ValueError):
    """A certificate that does not check out (one line naming the reason)."""


class NotACertificate(CertificateError):
    """A file that is not a certificate at all (not a JSON object of the certificate format):
    bad input rather than a rejected certificate."""


def make_certificate(*, version: str, construction: str, instance: dict, d: int, eps: Fraction, target: str,
                     prec: int, model_prec: int, model_json: dict, res: CertifyResult, assumptions: list) -> dict:
    """The certificate of a finished box run ``res`` (``assumptions``: the target's grid checks
    as :class:`~symbounds.core.claims.ClaimResult`)."""
    return {
        "format": CERT_FORMAT,
        "symbounds": version,
        "claim": f"sup over [0,1]^{d} of |T(x) - g(x)| <= eps",
        "construction": construction,
        "instance": instance,
        "d": d,
        "eps": str(eps),
        "target": target,
        "prec": prec,
        "model_prec": model_prec,
        "model_sha256": digest(model_json),
        "model": model_json,
        "verdict": res.verdict,
        "max_bound": None if res.max_bound is None else str(res.max_bound),
        "boxes": [{**b.as_json(), "bound": str(bd)} for b, bd in res.boxes],
        "undecided_boxes": [b.as_json() for b in res.undecided],
        "counterexample": res.counterexample,
        "assumptions": [a.as_json() for a in assumptions],
        "seconds": f"{res.seconds:.3f}",
        "boxes_evaluated": res.evaluated,
    }


def _req(obj, key, what="certificate"):
    if not isinstance(obj, dict) or key not in obj:
        raise CertificateError(f"{what}: missing '{key}'")
    return obj[key]


def _no_float(text):
    raise ModelFileError(f"JSON number {text!r}: numbers must be strings")


def load_certificate(path: str) -> dict:
    """Read a certificate file; :class:`NotACertificate` if it is not JSON of the certificate format."""
    try:
        cert = read_json_file(path, NotACertificate, _no_float, _no_float)
    except ModelFileError as e:
        raise NotACertificate(str(e)) from None
    if not isinstance(cert, dict) or cert.get("format") != CERT_FORMAT:
        raise NotACertificate(f"{path}: not a certificate (no 'format': {CERT_FORMAT!r})")
    return cert


def _claim_text(d: int) -> str:
    return f"sup over [0,1]^{d} of |T(x) - g(x)| <= eps"


def _check_fields(cert: dict) -> None:
    """The descriptive fields must be what a proved certificate holds: no unknown field, each of
    its JSON type, no undecided box, no counterexample, the claim's own wording."""
    unknown = sorted(k for k in cert if k not in FIELDS)
    if unknown:
        raise CertificateError(f"unknown field {str(unknown[0])[:40]!r}")
    for key, typ in FIELDS.items():
        v = _req(cert, key)
        if not isinstance(v, typ) or (typ is int and isinstance(v, bool)):
            want = {str: "a string", int: "an integer", dict: "an object", list: "a list"}.get(typ, "null")
            raise CertificateError(f"'{key}' must be {want}")
    if cert["undecided_boxes"]:
        raise CertificateError("'undecided_boxes' is not empty beside the verdict 'proved'")
    if cert["claim"] != _claim_text(cert["d"]):
        raise CertificateError(f"'claim' must read {_claim_text(cert['d'])!r}")
    lo, hi = MODEL_PREC_RANGE
    if not (lo <= cert["model_prec"] <= hi):
        raise CertificateError(f"'model_prec' must be an integer number of bits in {lo}..{hi}")
    for i, b in enumerate(cert["boxes"]):
        if not isinstance(b, dict) or set(b) != {"lo", "hi", "bound"}:
            raise CertificateError(f"boxes[{i}] must be an object with exactly 'lo', 'hi' and 'bound'")
        if not isinstance(b["lo"], list) or not isinstance(b["hi"], list) or not isinstance(b["bound"], str):
            raise CertificateError(f"boxes[{i}]: 'lo' and 'hi' must be lists, 'bound' a string")
    if any(not isinstance(a, dict) for a in cert["assumptions"]):
        raise CertificateError("'assumptions' must be a list of objects")


def _check_assumptions(cert: dict, rebuilt: list, same_prec: bool) -> None:
    """The recorded assumptions must be the construction's own, in order: the same ids and
    statements as the rebuilt grid checks, and (when re-run at the recorded precision) the same
    verdicts.  A certificate whose ``construction`` was changed carries the other one's."""
    recorded = cert["assumptions"]
    ids = [a.get("id") for a in recorded]
    want = [r.id for r in rebuilt]
    if ids != want:
        shown = lambda v: ", ".join(str(i)[:20] for i in v) or "none"
        raise CertificateError(f"the recorded assumptions ({shown(ids)}) are not those of the construction "
                               f"{str(cert['construction'])[:40]!r} ({shown(want)})")
    for a, r in zip(recorded, rebuilt):
        if a.get("statement") != r.statement:
            raise CertificateError(f"assumption {r.id}: the recorded statement is not the construction's")
        if same_prec and a.get("verdict") != str(r.verdict):
            raise CertificateError(f"assumption {r.id}: the recorded verdict {str(a.get('verdict'))[:20]!r} is not "
                                   f"the recomputed {str(r.verdict)!r}")


def write_certificate(path: str, cert: dict) -> None:
    atomic_write(path, json.dumps(cert, indent=1) + "\n")


def beside(path: str, verdict: str) -> str:
    """Where a ``verdict`` (refuted, undecided) certificate goes when ``path`` holds a proved one:
    ``good.json`` -> ``good.refuted.json`` (``.json`` dropped from the name first, if there)."""
    stem = path[:-5] if path.endswith(".json") else path
    return f"{stem}.{verdict}.json"


def holds_proved_certificate(path: str) -> bool:
    """Does ``path`` hold a certificate file whose verdict is proved?  (Its format and verdict are
    read, not re-checked: a file that only says so is kept too, which is the cautious side.)"""
    if not os.path.isfile(path):
        return False
    try:
        return load_certificate(path).get("verdict") == "proved"
    except CertificateError:
        return False


def certificate_destination(path: str, verdict: str, force: bool = False) -> str:
    """The file a certificate of ``verdict`` asked for at ``path`` is written to: ``path``, unless
    ``path`` holds a proved certificate, this one is not proved and ``force`` is not given; then
    :func:`beside` it, and the proved file is kept."""
    if verdict == "proved" or force or not holds_proved_certificate(path):
        return path
    return beside(path, verdict)


def check_certificate(cert: dict, rebuild, prec: int | None = None, progress=None) -> dict:
    """Re-verify a certificate from scratch; raises :class:`CertificateError` with the reason.

    ``rebuild(cert, d, eps, target, model_prec, prec) -> (model_json, assumption_results)`` is the
    construction's part: the model file its recorded instance gives at ``model_prec`` bits, and
    the target's grid checks re-run at ``prec`` bits.

    1. the format and the claim's numbers are well formed; ``eps`` in (0, 1); every field is
       known and of its type, none contradicts the verdict (undecided boxes, a counterexample);
       ``model_prec`` in 24..4096 and ``prec`` in 53..65536 before anything is rebuilt;
    2. the model is the construction of the recorded instance (rebuilt here) and matches its digest;
    3. the boxes lie in the cube and cover it (exact rational arithmetic);
    2b. the recorded assumptions are the construction's (ids, statements, verdicts);
    4. each box is re-evaluated: the recomputed bound must not exceed the recorded one, and
       every recorded bound, and their maximum, must be at most ``eps``.  Boxes are enclosed in
       outward-rounded float64 first and in Arb balls at ``prec`` bits when that bound is above
       the recorded one: either is a proof, so a certificate made either way checks.  Checked
       at a lower precision than the recorded one (``prec``), a box whose bound is missed there is
       enclosed once more at the recorded precision (counted in ``boxes_at_recorded_prec``);
    5. the target's grid checks are re-run: none may be refuted.
    """
    try:
        if not isinstance(cert, dict) or cert.get("format") != CERT_FORMAT:
            raise NotACertificate(f"not a certificate ('format' must be {CERT_FORMAT!r})")
        if _req(cert, "verdict") != "proved":
            raise CertificateError(f"its verdict is {cert['verdict']!r}, not 'proved'")
        _check_fields(cert)
        d = _req(cert, "d")
        if not isinstance(d, int) or isinstance(d, bool) or not (1 <= d <= 8):
            raise CertificateError("'d' must be an integer in 1..8")
        eps = parse_number(_req(cert, "eps"), "eps")
        if not (0 < eps < 1):
            raise CertificateError("eps must lie in (0, 1)")
        target = _req(cert, "target")
        if not isinstance(target, str):
            raise CertificateError("'target' must be a string")
        g = parse_target(target, d)
        cprec = prec or _req(cert, "prec")
        for p in (cprec, cert["prec"]):
            if not isinstance(p, int) or isinstance(p, bool) or not (MIN_CERT_PREC <= p <= 1 << 16):
                raise CertificateError(f"'prec' must be an integer number of bits in {MIN_CERT_PREC}..65536")
        mj = _req(cert, "model")
        if digest(mj) != _req(cert, "model_sha256"):
            raise CertificateError("the model does not match its digest (model_sha256)")
        model = model_from_json(mj)
        model_prec = _req(cert, "model_prec")
        rebuilt, assumptions = rebuild(cert, d, eps, target, model_prec, cprec)
        if digest(rebuilt) != digest(mj):
            raise CertificateError("the model is not the construction for the recorded instance")
        _check_assumptions(cert, assumptions, same_prec=cprec == cert["prec"])
        raw_boxes = _req(cert, "boxes")
        if not isinstance(raw_boxes, list) or not raw_boxes:
            raise CertificateError("'boxes' must be a non-empty list")
        boxes, bounds = [], []
        for i, b in enumerate(raw_boxes):
            lo = tuple(parse_number(v, f"boxes[{i}].lo") for v in _req(b, "lo", f"boxes[{i}]"))
            hi = tuple(parse_number(v, f"boxes[{i}].hi") for v in _req(b, "hi", f"boxes[{i}]"))
            if len(lo) != d or len(hi) != d or any(not (0 <= a < c <= 1) for a, c in zip(lo, hi)):
                raise CertificateError(f"box {i} is not a non-empty box inside [0,1]^{d}")
            bound = parse_number(_req(b, "bound", f"boxes[{i}]"), f"boxes[{i}].bound")
            if bound > eps:
                raise CertificateError(f"box {i} records the bound {bound} > eps = {eps}")
            boxes.append(Box(lo, hi))
            bounds.append(bound)
        recorded_max = parse_number(_req(cert, "max_bound"), "max_bound")
        if recorded_max != max(bounds):
            raise CertificateError("max_bound is not the largest box bound")
        if not boxes_cover_cube(boxes, d):
            raise CertificateError(f"the boxes do not cover [0,1]^{d}")
        fast = float_evaluator(model, cprec)
        recorded_prec, at_recorded = cert["prec"], 0
        for s in range(0, len(boxes), BATCH):
            part = slice(s, s + BATCH)
            again_all = box_bounds(model, g, d, boxes[part], cprec, fast, bounds[part], recheck=True)
            for i, (again, bound) in enumerate(zip(again_all, bounds[part]), start=s):
                if (again is None or again > bound) and cprec < recorded_prec:
                    # a bound Arb proved at the recorded precision can be out of reach at a lower one
                    again = box_bound(model, g, d, boxes[i], recorded_prec)
                    if again is not None and again <= bound:
                        at_recorded += 1
                if again is None or again > bound:
                    shown = "cannot be enclosed" if again is None else f"is {decimal_up(again, 6)}"
                    raise CertificateError(f"box {i}: the recomputed bound {shown}, above the recorded "
                                           f"{decimal_down(bound, 6)}")
            if progress is not None:
                progress(min(s + BATCH, len(boxes)), len(boxes))
        for r in assumptions:
            if r.verdict == "refuted":
                raise CertificateError(f"the target violates assumption {r.id}: {r.statement}")
    except (ModelFileError, ValueError, TypeError) as e:
        if isinstance(e, CertificateError):
            raise
        raise CertificateError(f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    return {"boxes": len(boxes), "max_bound": str(recorded_max), "eps": str(eps), "d": d,
            "boxes_at_recorded_prec": at_recorded}
