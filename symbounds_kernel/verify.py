"""Deciding a certificate: its fields, the cover of the cube, and every box's bound.

The claim of ``symbounds-certificate/1`` is ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` for the
network ``T`` of the embedded model file.  It is accepted when

1. the fields are well formed and consistent (verdict 'proved', no undecided box, no
   counterexample, the claim's wording, the instance's ``d``, ``eps`` and target equal to the
   claim's, the model's SHA-256, ``max_bound`` the largest box bound, every bound in [0, eps]);
2. the boxes lie in ``[0,1]^d`` and cover it (exact rationals, in any order, overlaps allowed);
3. for every box, the kernel's own enclosure of ``|T - g|`` is at most the box's recorded bound,
   the box being bisected (up to ``SPLITS`` times) where one enclosure is too wide.
"""

import decimal
import hashlib
import json
from fractions import Fraction

from flint import arb, ctx

from .network import Network
from .read import Rejected, number
from .target import evaluate, parse

FORMATS = ("symbounds-certificate/1", "symbounds-class-certificate/1")
PREC = 128  # bits of every ball
SPLITS = 6  # bisections of a box whose single enclosure misses its recorded bound
_KEYS = {"format", "symbounds", "claim", "construction", "instance", "d", "eps", "target", "prec",
         "model_prec", "model_sha256", "model", "verdict", "max_bound", "boxes", "undecided_boxes",
         "counterexample", "assumptions", "seconds", "boxes_evaluated"}



def digested(cert: dict, model: dict) -> dict:
    """``model``, after checking that the SHA-256 of its canonical JSON is ``model_sha256``."""
    canonical = json.dumps(model, sort_keys=True, separators=(",", ":")).encode()
    if hashlib.sha256(canonical).hexdigest() != cert["model_sha256"]:
        raise Rejected("the model does not match model_sha256")
    return model


def covering_boxes(cert: dict, d: int, eps: Fraction) -> list:
    """The certificate's boxes ``(lo, hi, bound)`` (:func:`_boxes`), after checking that
    ``max_bound`` is the largest bound and that they cover ``[0,1]^d`` exactly."""
    boxes = _boxes(_get(cert, "boxes", list), d, eps)
    if number(cert["max_bound"], "max_bound", exact=True) != max(b for _, _, b in boxes):
        raise Rejected("max_bound is not the largest box bound")
    if not covers([(lo, hi) for lo, hi, _ in boxes], d):
        raise Rejected(f"the boxes do not cover [0,1]^{d}")
    return boxes

def _get(obj, key, typ, what="certificate"):
    v = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(v, typ) or isinstance(v, bool):
        raise Rejected(f"{what}: '{key}' is missing or not {typ.__name__}")
    return v


def check(cert, progress=None, workers=1) -> str:
    """Accept ``cert`` (returns a one-line summary) or raise :class:`Rejected` with the reason;
    ``workers`` processes share the boxes."""
    if not isinstance(cert, dict) or cert.get("format") not in FORMATS:
        raise Rejected(f"unknown format {str(cert.get('format') if isinstance(cert, dict) else None)[:40]!r}")
    if cert["format"] == FORMATS[1]:
        from .holder import check_class
        return check_class(cert, progress)
    if set(cert) != _KEYS:
        raise Rejected(f"unknown or missing fields: {sorted(set(cert) ^ _KEYS)[:3]}")
    if cert["verdict"] != "proved" or cert["undecided_boxes"] != [] or cert["counterexample"] is not None:
        raise Rejected("the verdict is not 'proved' with no undecided box and no counterexample")
    d = _get(cert, "d", int)
    if not 1 <= d <= 8:
        raise Rejected("'d' is not in 1..8")
    if cert["claim"] != f"sup over [0,1]^{d} of |T(x) - g(x)| <= eps":
        raise Rejected("the claim's wording is not the claim checked")
    eps = number(cert["eps"], "eps", exact=True)
    if eps <= 0:
        raise Rejected("eps is not positive")
    target = _get(cert, "target", str)
    tree = parse(target, d)
    inst, kind = _get(cert, "instance", dict), cert["construction"]
    if kind == "model" and inst != {"inputs": d}:
        raise Rejected("instance of a model certificate is not {'inputs': d}")
    if kind == "shi_liao" and (inst.get("paper") != "shi_liao" or inst.get("d") != d or inst.get("target") != target
                               or number(inst.get("eps"), "instance.eps", exact=True) != eps):
        raise Rejected("the instance's paper, d, eps or target is not the claim's")
    if kind not in ("model", "shi_liao"):
        raise Rejected(f"unknown construction {str(kind)[:40]!r}")
    model = digested(cert, _get(cert, "model", dict))
    boxes = covering_boxes(cert, d, eps)
    old = ctx.prec
    ctx.prec = PREC
    try:
        net = Network(model, d)
        bad = _first_failure(net, tree, boxes, workers, progress)
        if bad is not None:
            raise Rejected(f"box {bad}: the kernel cannot bound |T - g| by its recorded bound {float(boxes[bad][2]):.6g}")
    finally:
        ctx.prec = old
    return f"{len(boxes)} boxes cover [0,1]^{d}; sup |T - g| <= {shown(max(b for *_, b in boxes))} <= eps = {eps}"


CHUNK = 32  # boxes per task of a worker process
_JOB = {}  # the network and target of the worker processes (inherited by fork)


def _first_failure(net, tree, boxes, workers, progress):
    """The index of a box whose bound the kernel cannot prove (None if every one is proved), with
    ``workers`` forked processes sharing chunks of :data:`CHUNK` boxes (any order: a box's check
    reads nothing of another's)."""
    size = CHUNK if workers > 1 else 1
    chunks = [range(i, min(i + size, len(boxes))) for i in range(0, len(boxes), size)]
    _JOB.update(net=net, tree=tree, boxes=boxes)
    pool = None
    if workers > 1 and len(chunks) > 1:
        import multiprocessing
        pool = multiprocessing.get_context("fork").Pool(min(workers, len(chunks)))
    try:
        done = 0
        for chunk, fail in (pool.imap_unordered if pool else map)(_chunk, chunks):
            if fail is not None:
                return fail
            done += len(chunk)
            if progress is not None:
                progress(done, len(boxes))
        return None
    finally:
        _JOB.clear()
        if pool:
            pool.terminate()


def _chunk(chunk):
    """``(chunk, i)``: the first box ``i`` of the chunk the kernel does not prove, or None."""
    net, tree, boxes = _JOB["net"], _JOB["tree"], _JOB["boxes"]
    return chunk, next((i for i in chunk if not _proves(net, tree, *boxes[i], SPLITS)), None)


def shown(q: Fraction) -> decimal.Decimal:
    """``q`` to 6 digits, rounded up."""
    with decimal.localcontext(prec=6, rounding=decimal.ROUND_CEILING):
        return decimal.Decimal(q.numerator) / q.denominator


def _boxes(raw, d, eps):
    if not raw:
        raise Rejected("no boxes")
    out = []
    for i, b in enumerate(raw):
        if not isinstance(b, dict) or set(b) != {"lo", "hi", "bound"} or not all(
                isinstance(b[k], list) and len(b[k]) == d for k in ("lo", "hi")):
            raise Rejected(f"box {i}: not an object of 'lo', 'hi' ({d} ends each) and 'bound'")
        lo = [number(v, f"box {i}", exact=True) for v in b["lo"]]
        hi = [number(v, f"box {i}", exact=True) for v in b["hi"]]
        bound = number(b["bound"], f"box {i}", exact=True)
        if not all(0 <= a < c <= 1 for a, c in zip(lo, hi)):
            raise Rejected(f"box {i} is not a non-empty box inside [0,1]^{d}")
        if not 0 <= bound <= eps:
            raise Rejected(f"box {i}: its bound {float(bound):.6g} is not in [0, eps]")
        out.append((lo, hi, bound))
    return out


def covers(boxes, d, axis=0) -> bool:
    """Do the closed boxes ``(lo, hi)`` (inside the cube) cover ``[0,1]^d`` in the axes from
    ``axis`` on?  Cut that axis at every face; each slab must be covered by the boxes spanning it."""
    if axis == d:
        return bool(boxes)
    cuts = sorted({Fraction(0), Fraction(1)} | {b[s][axis] for b in boxes for s in (0, 1)})
    for a, c in zip(cuts, cuts[1:]):
        if not covers([b for b in boxes if b[0][axis] <= a and b[1][axis] >= c], d, axis + 1):
            return False
    return True


def _upper(v: arb) -> Fraction:
    man, exp = v.upper().mid().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def _proves(net, tree, lo, hi, bound, splits) -> bool:
    """Is ``|T - g| <= bound`` on the box, from one enclosure or from its two halves'?"""
    try:
        T = net.enclose(lo, hi)
        g = evaluate(tree, [_interval(a, c) for a, c in zip(lo, hi)])
        err = abs(T - g)
        if err.is_finite() and _upper(err) <= bound:
            return True
    except (ArithmeticError, ValueError):
        pass
    if splits == 0:
        return False
    k = max(range(len(lo)), key=lambda i: hi[i] - lo[i])
    mid = (lo[k] + hi[k]) / 2
    return (_proves(net, tree, lo, hi[:k] + [mid] + hi[k + 1:], bound, splits - 1)
            and _proves(net, tree, lo[:k] + [mid] + lo[k + 1:], hi, bound, splits - 1))


def _interval(a: Fraction, c: Fraction) -> arb:
    """A ball containing ``[a, c]``."""
    ball = lambda q: arb(q.numerator) / q.denominator
    return ball(a).union(ball(c))
