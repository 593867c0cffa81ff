"""Certified output bounds of a user's network over an input box, and whole-cube certificates of it.

:func:`bound` encloses ``{T(x) : x in B}`` for a box ``B = [lo_1, hi_1] x ... x [lo_m, hi_m]``:
``B`` is cut into sub-boxes (bisecting the widest side ``split`` times, or until every side is at
most ``width``), ``T`` is evaluated on each sub-box ``x0 +- h`` with first-order Taylor models
(:mod:`symbounds.core.taylor`; ``T(x0 + delta) in c + <g, delta> + [-r, r]``), and the union of
the sub-box enclosures is returned with exact rational endpoints.  When the Taylor models cannot
evaluate a sub-box (a hardmax whose winner is not decided on it, a reciprocal of a model whose
range contains 0), the sub-box is evaluated once more with plain Arb interval balls
(``x_i in [lo_i, hi_i]`` as one ball each); the result says which evaluation was used.

Input coordinates:

* vector-input model (``"input": "vector"``): the box has one interval per coordinate ``x_1..x_d``;
* token-set model (``"input": "tokens"``, ``Z_0`` given as a ``D x n`` matrix, tokens as columns):
  the box lists the ``D n`` entries of ``Z_0`` **token by token** (column-major): interval
  ``j D + r`` (0-based) bounds ``Z_0[r, j]``, feature ``r`` of token ``j``.

The output is the readout ``Z_L[row, column]`` when the model has one, else every entry of
``Z_L``, listed in the same column-major order.

:func:`certify` proves ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` for a vector-input model file
with :func:`symbounds.core.boxes.certify_model`, and writes the same certificate as the
constructions (construction ``"model"``; the network is the embedded model itself, so
:func:`rebuild` returns it and there are no assumptions on ``g`` to re-check).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from fractions import Fraction

from .boxes import Box, CertifyOptions, CertifyResult, certify_model
from .certificate import CertificateError, make_certificate
from .contexts import BallContext, Undecided
from .exact import NumberError, parse_number
from .modelfile import ModelFileError, model_from_json, model_to_json
from .taylor import TaylorContext
from .transformer import Transformer, forward

__all__ = ["BoundError", "BoundResult", "bound", "input_dimension", "sub_boxes", "evaluate_box",
           "outputs_at", "certify", "rebuild", "MAX_BOXES"]

#: The most sub-boxes one call may evaluate.
MAX_BOXES = 1 << 16


class BoundError(NumberError):
    """A box or option that cannot be used (one line naming the problem)."""


class BoundUndecided(ArithmeticError):
    """A sub-box on which neither Taylor models nor interval balls could evaluate the model."""


@dataclass
class BoundResult:
    """``lower <= T(x) <= upper`` for every ``x`` of the box (exact rationals; one pair per output
    when the model has no readout, as tuples in column-major order)."""

    lower: Fraction | tuple
    upper: Fraction | tuple
    boxes: int
    seconds: float
    method: str  # "taylor", "ball" or "taylor+ball" (some sub-boxes needed interval balls)
    shape: tuple | None = None  # (D, n) of the output matrix, None for a readout

    def _pairs(self) -> list:
        if isinstance(self.lower, tuple):
            return list(zip(self.lower, self.upper))
        return [(self.lower, self.upper)]

    def __repr__(self) -> str:
        """The enclosure as outward-rounded 12-digit decimals (the exact ends are ``lower`` and
        ``upper``); an output matrix shows its first entries and its shape."""
        from .display import enclosure_text, short

        pairs = self._pairs()
        ends = ", ".join(enclosure_text(a, b) for a, b in pairs[:3]) + (", ..." if len(pairs) > 3 else "")
        what = "T(x) in " + ends if self.shape is None else f"Z ({self.shape[0]}x{self.shape[1]}) in {ends}"
        return short(f"BoundResult({what}; {self.boxes} boxes, {self.method}, {self.seconds:.2f} s)")

    def _repr_latex_(self) -> str:
        """``T(x) \\in [lower, upper]`` (one row per entry of an output matrix), outward-rounded."""
        from .display import enclosure_text

        pairs = self._pairs()
        if self.shape is None:
            rows = [rf"T(x) \in {enclosure_text(*pairs[0])}"]
        else:
            D = self.shape[0]
            rows = [rf"Z_{{{k % D},{k // D}}} \in {enclosure_text(a, b)}" for k, (a, b) in enumerate(pairs)]
        note = rf"\text{{{self.boxes} sub-boxes, {self.method}}}"
        return r"$$\begin{aligned}" + r" \\ ".join(rows + [note]) + r"\end{aligned}$$"


def input_dimension(model: Transformer) -> int:
    """How many real inputs the model takes (``d``, or ``D n`` for a token-set model)."""
    if model.input == "vector":
        return len(model.embedding.E[0])
    raise BoundError("a token-set model file does not record its number of tokens: give the box")


def _token_shape(model: Transformer, m: int) -> tuple[int, int]:
    D = model.width
    if m % D:
        raise BoundError(f"the box has {m} intervals, not a multiple of the token width D = {D}")
    return D, m // D


def _end(v, what) -> Fraction:
    if isinstance(v, str):
        return parse_number(v, what, BoundError)
    if isinstance(v, (int, Fraction)) and not isinstance(v, bool):
        return Fraction(v)
    raise BoundError(f"{what}: expected an int, a Fraction or a string like '1/2' "
                     f"(a {type(v).__name__} is not exact)")


def check_box(model: Transformer, lo, hi) -> Box:
    """The box ``[lo_1, hi_1] x ... x [lo_d, hi_d]`` with exact ends, checked against the model's
    inputs (one interval per input coordinate or token entry); :class:`BoundError` names the problem."""
    lo = tuple(_end(v, f"lower end {i}") for i, v in enumerate(lo))
    hi = tuple(_end(v, f"upper end {i}") for i, v in enumerate(hi))
    if len(lo) != len(hi) or not lo:
        raise BoundError("the box needs as many lower as upper ends (at least one)")
    for i, (a, b) in enumerate(zip(lo, hi)):
        if a > b:
            raise BoundError(f"interval {i}: lower end {a} is above the upper end {b}")
    if model.input == "vector":
        d = input_dimension(model)
        if len(lo) != d:
            raise BoundError(f"the box has {len(lo)} intervals, the model has {d} inputs")
    else:
        _token_shape(model, len(lo))
    return Box(lo, hi)


def sub_boxes(box: Box, split: int = 0, width=None) -> list[Box]:
    """Bisect the widest side ``split`` times (``2^split`` sub-boxes), or, with ``width``, until
    every side is at most ``width``."""
    if width is not None:
        width = Fraction(width)
        if width <= 0:
            raise BoundError("the width must be positive")
        n = 1
        for a, b in zip(box.lo, box.hi):
            k = 0
            while (b - a) / 2**k > width:
                k += 1
            n *= 2**k
            if n > MAX_BOXES:
                raise BoundError(f"width {width} needs more than {MAX_BOXES} sub-boxes")
        out, queue = [], [box]
        while queue:
            b = queue.pop()
            if b.width() > width:
                queue.extend(b.split())
            else:
                out.append(b)
        return out
    if not (0 <= split <= 16):
        raise BoundError(f"split depth {split}: use 0..16")
    boxes = [box]
    for _ in range(split):
        boxes = [half for b in boxes for half in b.split()]
    return boxes


def _shape_input(model: Transformer, xs: list):
    """The forward pass's input from the flat coordinates (column-major for tokens)."""
    if model.input == "vector":
        return xs
    D, n = _token_shape(model, len(xs))
    return [[xs[j * D + r] for j in range(n)] for r in range(D)]


def _flat_output(model: Transformer, out) -> list:
    if model.readout is not None:
        return [out]
    D, n = len(out), len(out[0])
    return [out[r][j] for j in range(n) for r in range(D)]


def evaluate_box(model: Transformer, box: Box, prec: int):
    """``(ctx, outputs, method)``: the model's outputs over ``box`` as numbers of ``ctx`` (Taylor
    models, or interval balls when the Taylor models fail); raises :class:`BoundUndecided`."""
    ctx = TaylorContext(prec, box.centre, box.half)
    ctx.half_widths = box.half
    # The weights are converted once per context name and precision and keep the box of the
    # context that converted them; convert them again when the sub-box has other half-widths, so
    # that no operation can bound a linear part with another box's half-widths.
    key = (ctx.name, ctx.prec)
    cached = model.cached_numeric(key)
    if cached is not None and getattr(cached.ctx, "half_widths", None) != box.half:
        model.drop_numeric(key)
    try:
        with ctx.scope():
            out = forward(ctx, model, _shape_input(model, ctx.inputs()))
            vals = _flat_output(model, out)
        if all(v.range().is_finite() for v in vals):
            return ctx, vals, "taylor"
    except (Undecided, ZeroDivisionError, TypeError, ValueError):
        pass
    ball = BallContext(prec)
    try:
        with ball.scope():
            xs = [ball.convert(a).union(ball.convert(b)) for a, b in zip(box.lo, box.hi)]
            out = forward(ball, model, _shape_input(model, xs))
            vals = _flat_output(model, out)
        if not all(v.is_finite() for v in vals):
            raise Undecided("a non-finite enclosure")
        return ball, vals, "ball"
    except (Undecided, ZeroDivisionError) as e:
        raise BoundUndecided(f"the model cannot be enclosed over the sub-box "
                             f"[{', '.join(f'{a}:{b}' for a, b in zip(box.lo, box.hi))}] ({e}); "
                             "split the box further") from None


def enclosure(ctx, v) -> tuple[Fraction, Fraction]:
    """Exact ``(lower, upper)`` of a context number (a Taylor model's range, or a ball)."""
    rng = v.range() if hasattr(v, "range") else v
    return BallContext(ctx.prec).to_fraction_bounds(rng)


def outputs_at(model: Transformer, x, prec: int = 128) -> list:
    """The outputs at the exact point ``x`` (flat coordinates) as Arb balls."""
    ball = BallContext(prec)
    with ball.scope():
        out = forward(ball, model, _shape_input(model, [ball.convert(Fraction(v)) for v in x]))
        return _flat_output(model, out)


def bound(model, lo, hi, split: int = 0, width=None, prec: int = 128) -> BoundResult:
    """A certified enclosure of the model's output over the box ``[lo, hi]`` (see the module
    docstring); ``model`` is a :class:`Transformer`, a model-file dict or a path."""
    t0 = time.perf_counter()
    model = _as_model(model)
    if not (24 <= int(prec) <= 1 << 16):
        raise BoundError(f"precision {prec}: use between 24 and 65536 bits")
    box = check_box(model, lo, hi)
    boxes = sub_boxes(box, split, width)
    los = his = None
    methods = set()
    for b in boxes:
        ctx, vals, method = evaluate_box(model, b, prec)
        methods.add(method)
        ends = [enclosure(ctx, v) for v in vals]
        if los is None:
            los, his = [e[0] for e in ends], [e[1] for e in ends]
        else:
            los = [min(a, e[0]) for a, e in zip(los, ends)]
            his = [max(a, e[1]) for a, e in zip(his, ends)]
    method = "taylor" if methods == {"taylor"} else ("ball" if methods == {"ball"} else "taylor+ball")
    if model.readout is not None:
        return BoundResult(los[0], his[0], len(boxes), time.perf_counter() - t0, method)
    D = model.width
    return BoundResult(tuple(los), tuple(his), len(boxes), time.perf_counter() - t0, method, (D, len(los) // D))


def _as_model(model) -> Transformer:
    if isinstance(model, Transformer):
        return model
    if isinstance(model, dict):
        return model_from_json(model)
    if isinstance(model, str):
        from .modelfile import load_model

        return load_model(model)
    raise TypeError("model: expected a Transformer, a model-file dict or a path")


# ------------------------------------------------------------------------------------------
# whole-cube certificates of a user's model


def certify(model, target: str, eps, opts: CertifyOptions | None = None, progress=None,
            version: str | None = None) -> tuple[dict, CertifyResult]:
    """Prove ``sup_{x in [0,1]^d} |T(x) - g(x)| <= eps`` for a vector-input model; returns
    ``(certificate, result)`` (construction ``"model"``, the model file embedded)."""
    from .version import __version__

    opts = opts or CertifyOptions()
    if isinstance(model, Transformer):
        mj = model_to_json(model, opts.model_prec)
    elif isinstance(model, dict):
        mj = model
    else:
        from .files import read_json_file

        mj = read_json_file(model, ModelFileError, _reject_float, _reject_float)
    m = model_from_json(mj)
    if m.input != "vector":
        raise BoundError("certify over the cube needs a vector-input model (a token-set model has no cube)")
    d = input_dimension(m)
    if not (1 <= d <= 8):
        raise BoundError(f"the model has {d} inputs: certificates cover dimensions 1..8")
    eps = Fraction(eps)
    if not (0 < eps < 1):
        raise BoundError("eps must lie in (0, 1)")
    res = certify_model(mj, target, d, eps, opts, progress)
    cert = make_certificate(version=version or __version__, construction="model", instance={"inputs": d}, d=d,
                            eps=eps, target=target, prec=opts.prec, model_prec=int(mj.get("precision_bits", 0)),
                            model_json=mj, res=res, assumptions=[])
    return cert, res


def _reject_float(text):
    raise ModelFileError(f"JSON number {text!r}: numbers must be strings (exact '3', '7/8' or decimals)")


def rebuild(cert: dict, d: int, eps, target: str, model_prec: int, prec: int):
    """The ``rebuild`` of a user model's certificate: the network is the embedded model itself
    (checked against its digest by the caller), and no assumptions on the target are made."""
    mj = cert.get("model")
    m = model_from_json(mj)
    if m.input != "vector" or input_dimension(m) != d:
        raise CertificateError(f"the embedded model does not take {d} inputs")
    return mj, []
