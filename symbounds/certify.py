"""Whole-domain certificates: ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` proved box by box.

The network is evaluated on each input box with first-order Taylor models
(:mod:`symbounds.taylor`), so the output model encloses ``T`` over the whole box; the target is
enclosed over the box by evaluating its SymPy expression on Arb balls.  A box is proved when the
upper end of ``|T(box) - g(box)|`` is at most ``eps``; otherwise it is split along its widest side,
down to ``min_width``.  A box whose centre already violates the bound (decided on balls) refutes
the claim with a counterexample.

The certified network is a concrete rational one: the construction's weights written at
``model_prec`` bits (the model file format, ``symbounds-transformer/1``) and read back exactly.
The certificate carries that model, the instance it was built from, every box with its bound, and
the target's grid checks; ``check`` re-derives all of it (see :func:`check_certificate`).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import time
from dataclasses import dataclass, field
from fractions import Fraction

from . import __version__
from .contexts import BallContext, Undecided, _arb_exact_to_fraction
from .expr import parse_target, variables
from .io import ModelFileError, model_from_json, model_to_json, parse_number
from .taylor import TaylorContext
from .transformer import forward

__all__ = [
    "CERT_FORMAT",
    "Box",
    "CertifyOptions",
    "CertifyResult",
    "certify_model",
    "certify_instance",
    "check_certificate",
    "CertificateError",
    "boxes_cover_cube",
]

CERT_FORMAT = "symbounds-certificate/1"


class CertificateError(ValueError):
    """A certificate that does not check out (one line naming the reason)."""


@dataclass(frozen=True)
class Box:
    """The closed box ``[lo_i, hi_i]`` (exact rationals)."""

    lo: tuple
    hi: tuple

    @property
    def centre(self):
        return tuple((a + b) / 2 for a, b in zip(self.lo, self.hi))

    @property
    def half(self):
        return tuple((b - a) / 2 for a, b in zip(self.lo, self.hi))

    def split(self) -> tuple["Box", "Box"]:
        k = max(range(len(self.lo)), key=lambda i: self.hi[i] - self.lo[i])
        mid = (self.lo[k] + self.hi[k]) / 2
        left = Box(self.lo, self.hi[:k] + (mid,) + self.hi[k + 1:])
        right = Box(self.lo[:k] + (mid,) + self.lo[k + 1:], self.hi)
        return left, right

    def width(self):
        return max(b - a for a, b in zip(self.lo, self.hi))

    def as_json(self):
        return {"lo": [str(v) for v in self.lo], "hi": [str(v) for v in self.hi]}


@dataclass
class CertifyOptions:
    prec: int = 128
    initial: int | None = None  # boxes per axis to start with (default by dimension)
    min_width: Fraction = Fraction(1, 2**20)
    max_boxes: int = 200_000
    workers: int = 1  # local processes
    scheduler: str | None = None  # a Dask scheduler address (optional extra "dask")
    model_prec: int = 192


@dataclass
class CertifyResult:
    verdict: str  # proved / refuted / undecided
    boxes: list  # [(Box, Fraction bound)] for the proved boxes
    max_bound: Fraction | None
    counterexample: dict | None
    undecided: list  # boxes that could not be decided
    seconds: float
    evaluated: int
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------------
# evaluating one box


def box_bound(model, g, d: int, box: Box, prec: int) -> Fraction | None:
    """An exact upper bound of ``|T(x) - g(x)|`` over ``box``, or None if the Taylor models fail
    (a division by a model whose range contains 0, a non-finite enclosure)."""
    ctx = TaylorContext(prec, box.centre, box.half)
    try:
        T = forward(ctx, model, ctx.inputs())
    except Undecided:
        return None
    ball = ctx.ball
    xs = variables(d)
    with ball.scope():
        # the union of the balls of the two (exact) ends contains the whole side [lo, hi]
        env = {x: ball.convert(lo).union(ball.convert(hi)) for x, lo, hi in zip(xs, box.lo, box.hi)}
        gv = ball.from_sympy(g, env=env)
        err = abs(T.range() - gv)
        if not err.is_finite():
            return None
        return _arb_exact_to_fraction(err.upper())


def point_error(model, g, d: int, x, prec: int):
    """The ball ``|T(x) - g(x)|`` at a point (for counterexamples)."""
    ctx = BallContext(prec)
    with ctx.scope():
        T = forward(ctx, model, x)
        gv = ctx.from_sympy(g, env={s: ctx.convert(v) for s, v in zip(variables(d), x)})
        return abs(T - gv)


# worker processes: the model and target are set once per process
_W: dict = {}


def _worker_init(model_json, target_text, d, prec):
    _W["model"] = model_from_json(model_json)
    _W["g"] = parse_target(target_text, d)
    _W["d"] = d
    _W["prec"] = prec


def _worker_eval(box):
    return box, box_bound(_W["model"], _W["g"], _W["d"], box, _W["prec"])


def _dask_batch(setup, boxes):
    """One Dask task: a batch of boxes (the model is parsed once per worker process)."""
    key = setup[0]
    if _W.get("key") != key:
        _worker_init(*setup[1:])
        _W["key"] = key
    return [_worker_eval(b) for b in boxes]


class _DaskMap:
    """``imap``-like evaluation of boxes on a Dask cluster, in batches."""

    def __init__(self, address, model_json, target_text, d, prec):
        try:
            from distributed import Client
        except ImportError:
            raise ValueError("--scheduler needs the optional dependency: pip install 'symbounds[dask]'") from None
        try:
            self.client = Client(address, timeout="10s")
        except OSError as e:
            raise ValueError(f"cannot reach the Dask scheduler at {address}: {str(e).splitlines()[0]}") from None
        self.setup = (_digest(model_json) + target_text + str(prec), model_json, target_text, d, prec)
        self.setup_future = self.client.scatter(self.setup, broadcast=True)

    def imap(self, boxes):
        from distributed import as_completed

        size = max(1, min(64, len(boxes) // (4 * max(1, len(self.client.ncores())))))
        futures = [self.client.submit(_dask_batch, self.setup_future, boxes[i:i + size], pure=False)
                   for i in range(0, len(boxes), size)]
        for fut in as_completed(futures):
            yield from fut.result()

    def close(self):
        self.client.close()


def _initial_boxes(d: int, per_axis: int) -> list[Box]:
    import itertools

    edges = [Fraction(i, per_axis) for i in range(per_axis + 1)]
    out = []
    for idx in itertools.product(range(per_axis), repeat=d):
        out.append(Box(tuple(edges[i] for i in idx), tuple(edges[i + 1] for i in idx)))
    return out


def certify_model(model_json: dict, target_text: str, d: int, eps: Fraction, opts: CertifyOptions,
                  progress=None) -> CertifyResult:
    """Prove ``|T - g| <= eps`` on ``[0,1]^d`` for the model file ``model_json``."""
    t0 = time.perf_counter()
    model = model_from_json(model_json)
    g = parse_target(target_text, d)
    per_axis = opts.initial or {1: 64, 2: 16}.get(d, 4)
    queue = _initial_boxes(d, per_axis)
    proved: list = []
    undecided: list = []
    counter = None
    evaluated = 0
    pool = dask = None
    if opts.scheduler:
        dask = _DaskMap(opts.scheduler, model_json, target_text, d, opts.prec)
    elif opts.workers > 1:
        mp = multiprocessing.get_context("fork")
        pool = mp.Pool(opts.workers, initializer=_worker_init, initargs=(model_json, target_text, d, opts.prec))
    else:
        _worker_init(model_json, target_text, d, opts.prec)
    try:
        while queue and counter is None:
            if evaluated + len(queue) > opts.max_boxes:
                undecided.extend(queue)
                break
            if dask is not None:
                results = dask.imap(queue)
            elif pool is not None:
                results = pool.imap_unordered(_worker_eval, queue, chunksize=max(1, len(queue) // (8 * opts.workers)))
            else:
                results = (_worker_eval(b) for b in queue)
            nxt = []
            for box, bound in results:
                evaluated += 1
                if bound is not None and bound <= eps:
                    proved.append((box, bound))
                else:
                    err = point_error(model, g, d, box.centre, opts.prec)
                    if err > BallContext(opts.prec).convert(eps):
                        counter = {"x": [str(v) for v in box.centre], "error": err.str(20, radius=True)}
                        break
                    if box.width() / 2 < opts.min_width:
                        undecided.append(box)
                    else:
                        nxt.extend(box.split())
                if progress is not None:
                    progress(len(proved), len(proved) + len(nxt) + len(undecided))
            queue = nxt
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
        if dask is not None:
            dask.close()
    if counter is not None:
        verdict = "refuted"
    elif undecided:
        verdict = "undecided"
    else:
        verdict = "proved"
    max_bound = max((b for _, b in proved), default=None)
    proved.sort(key=lambda t: (t[0].lo, t[0].hi))
    return CertifyResult(verdict, proved, max_bound, counter, undecided, time.perf_counter() - t0, evaluated)


# ------------------------------------------------------------------------------------------
# the [SL26] instance -> model -> certificate


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def certify_instance(inst, opts: CertifyOptions, progress=None) -> tuple[dict, CertifyResult]:
    """Certify the construction of ``inst`` over the whole cube; returns (certificate, result)."""
    from .papers import shi_liao as sl
    from .verify import decide

    K = sl.constants(inst)
    exact_model = sl.build(K)
    mj = model_to_json(exact_model, opts.model_prec)
    ball = BallContext(opts.prec)
    assumptions = [decide(ball, m) for m in sl.measure_assumptions(ball, K)]
    res = certify_model(mj, inst.target_text, inst.d, inst.eps, opts, progress)
    if any(a.verdict == "refuted" for a in assumptions):
        res.verdict = "refuted"
    elif res.verdict == "proved" and any(a.verdict == "undecided" for a in assumptions):
        res.verdict = "undecided"
    cert = {
        "format": CERT_FORMAT,
        "symbounds": __version__,
        "claim": f"sup over [0,1]^{inst.d} of |T(x) - g(x)| <= eps",
        "construction": "shi_liao",
        "instance": inst.as_json(),
        "d": inst.d,
        "eps": str(inst.eps),
        "target": inst.target_text,
        "prec": opts.prec,
        "model_prec": opts.model_prec,
        "model_sha256": _digest(mj),
        "model": mj,
        "verdict": res.verdict,
        "max_bound": None if res.max_bound is None else str(res.max_bound),
        "boxes": [{**b.as_json(), "bound": str(bd)} for b, bd in res.boxes],
        "undecided_boxes": [b.as_json() for b in res.undecided],
        "counterexample": res.counterexample,
        "assumptions": [a.as_json() for a in assumptions],
        "seconds": f"{res.seconds:.3f}",
        "boxes_evaluated": res.evaluated,
    }
    return cert, res


# ------------------------------------------------------------------------------------------
# checking


def boxes_cover_cube(boxes: list[Box], d: int) -> bool:
    """Do the closed boxes cover ``[0,1]^d``?  Exact: split the cube at box faces until every
    piece lies inside one box (or some piece meets no box)."""
    cube = Box(tuple([Fraction(0)] * d), tuple([Fraction(1)] * d))
    stack = [(cube, boxes)]
    steps = 0
    while stack:
        cell, cand = stack.pop()
        steps += 1
        if steps > 50 * (len(boxes) + 10) * d:
            return False
        cand = [b for b in cand if all(b.lo[i] < cell.hi[i] and b.hi[i] > cell.lo[i] for i in range(d))]
        if not cand:
            return False
        if any(all(b.lo[i] <= cell.lo[i] and b.hi[i] >= cell.hi[i] for i in range(d)) for b in cand):
            continue
        # split at a face of a candidate box that lies strictly inside the cell, on the axis and
        # at the position nearest the middle of the cell's widest side
        best = None
        for b in cand:
            for i in range(d):
                mid = (cell.lo[i] + cell.hi[i]) / 2
                for v in (b.lo[i], b.hi[i]):
                    if cell.lo[i] < v < cell.hi[i]:
                        key = (-(cell.hi[i] - cell.lo[i]), abs(v - mid))
                        if best is None or key < best[0]:
                            best = (key, i, v)
        if best is None:
            return False
        _, i, v = best
        left = Box(cell.lo, cell.hi[:i] + (v,) + cell.hi[i + 1:])
        right = Box(cell.lo[:i] + (v,) + cell.lo[i + 1:], cell.hi)
        stack.append((left, cand))
        stack.append((right, cand))
    return True


def _req(obj, key, what="certificate"):
    if not isinstance(obj, dict) or key not in obj:
        raise CertificateError(f"{what}: missing '{key}'")
    return obj[key]


def load_certificate(path: str) -> dict:
    from .io import read_json_file

    try:
        return read_json_file(path, CertificateError, _no_float, _no_float)
    except ModelFileError as e:
        raise CertificateError(str(e)) from None


def _no_float(text):
    raise ModelFileError(f"JSON number {text!r}: numbers must be strings")


def check_certificate(cert: dict, prec: int | None = None, progress=None) -> dict:
    """Re-verify a certificate from scratch; raises :class:`CertificateError` with the reason.

    1. the format and the claim's numbers are well formed; ``eps`` in (0, 1);
    2. the model is the construction of the recorded instance, written at ``model_prec`` bits
       (rebuilt here), and matches its digest;
    3. the boxes lie in the cube and cover it (exact rational arithmetic);
    4. each box is re-evaluated: the recomputed bound must not exceed the recorded one, and
       every recorded bound, and their maximum, must be at most ``eps``;
    5. the target's grid checks are re-run: none may be refuted.
    """
    from .papers import shi_liao as sl

    try:
        if _req(cert, "format") != CERT_FORMAT:
            raise CertificateError(f"format must be {CERT_FORMAT!r}")
        if _req(cert, "verdict") != "proved":
            raise CertificateError(f"its verdict is {cert['verdict']!r}, not 'proved'")
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
        if not isinstance(cprec, int) or not (24 <= cprec <= 1 << 16):
            raise CertificateError("'prec' must be an integer number of bits in 24..65536")
        mj = _req(cert, "model")
        if _digest(mj) != _req(cert, "model_sha256"):
            raise CertificateError("the model does not match its digest (model_sha256)")
        model = model_from_json(mj)
        inst_json = _req(cert, "instance")
        inst = sl.Instance(
            d=d, alpha=_req(inst_json, "alpha", "instance"), C_H=_req(inst_json, "holder", "instance"),
            B=_req(inst_json, "bound", "instance"), eps=eps, target=target,
            M=inst_json.get("M"), M_g=inst_json.get("Mg"),
        )
        if inst_json.get("d") != d or parse_number(inst_json.get("eps", "0"), "instance.eps") != eps:
            raise CertificateError("the instance disagrees with the claim (d or eps)")
        model_prec = _req(cert, "model_prec")
        rebuilt = model_to_json(sl.build(sl.constants(inst)), model_prec)
        if _digest(rebuilt) != _digest(mj):
            raise CertificateError("the model is not the construction for the recorded instance")
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
        for i, (box, bound) in enumerate(zip(boxes, bounds)):
            again = box_bound(model, g, d, box, cprec)
            if again is None or again > bound:
                shown = "cannot be enclosed" if again is None else f"is {float(again):.6g}"
                raise CertificateError(f"box {i}: the recomputed bound {shown}, above the recorded "
                                       f"{float(bound):.6g}")
            if progress is not None:
                progress(i + 1, len(boxes))
        ball = BallContext(cprec)
        from .verify import decide

        for m in sl.measure_assumptions(ball, sl.constants(inst)):
            r = decide(ball, m)
            if r.verdict == "refuted":
                raise CertificateError(f"the target violates assumption {r.id}: {r.statement}")
    except (ModelFileError, ValueError, TypeError) as e:
        if isinstance(e, CertificateError):
            raise
        raise CertificateError(f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    return {"boxes": len(boxes), "max_bound": str(recorded_max), "eps": str(eps), "d": d}


def write_certificate(path: str, cert: dict) -> None:
    from .io import atomic_write

    atomic_write(path, json.dumps(cert, indent=1) + "\n")
