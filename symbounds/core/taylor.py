"""First-order Taylor models over an input box: the context that evaluates a network on a whole box.

A number is a :class:`TM` ``c + <g, delta> + [-r, r]``: an Arb ball ``c``, a gradient of Arb balls
``g`` (one per input coordinate) and a remainder radius ``r``, valid for every
``delta = x - x0`` in the box ``|delta_i| <= h_i``.  Every operation returns a model that encloses
the exact result for every point of the box (the inclusion principle of interval arithmetic,
one order higher), so ``TaylorContext.range(forward(ctx, model, box_input))`` encloses ``T`` over
the whole box.

Why first order: plain balls lose all correlation between the softmax scores of one row (each
score's width ``|grad| * h`` is huge at the attention scales of [SL26]), so ``exp(s_k - m)``
explodes.  With Taylor models the shift ``m`` is itself a model (the top score's), the linear
parts of ``s_k - m`` cancel to the *difference* of the gradients, and only that difference (times
``h``) enters the exponential.

Remainders (``U`` = a bound of ``|<g, delta>| + r``):

* ``a * b``: ``|La| |Lb| + ra (|cb| + |Lb|) + rb (|ca| + |La|) + ra rb``
* ``exp(a)``: ``e^c (1 + <g, delta> + R)`` with ``0 <= R <= e^L - 1 - L`` (``L`` = the bound of the
  linear part; the model is centred on ``R``'s midpoint) plus ``e^c e^U ra`` for ``a``'s remainder
* ``1/b``: ``1/c - <g, delta>/c^2`` plus ``rb/|c|^2 + U^2 max|1/xi^3|`` over the range of ``b``
* ReLU / max / min / abs: exact when the sign is decided on the box, else the hull of the range
  (a constant model).

Constants (weights) carry ``g = None`` and cost one ball operation.
"""

from __future__ import annotations

import contextlib

import flint

from .contexts import BallContext, Context, Undecided

__all__ = ["TM", "TaylorContext"]


class TM:
    """``c + <g, delta> + [-r, r]`` over the box of its :class:`TaylorContext`."""

    __slots__ = ("c", "g", "r", "ctx")

    def __init__(self, ctx: "TaylorContext", c: flint.arb, g=None, r=None):
        self.ctx = ctx
        self.c = c
        self.g = g  # tuple of arb, or None for a constant
        self.r = r  # arb >= 0 (an upper bound), or None for 0

    # --- helpers ---------------------------------------------------------------------------
    def _lin_bound(self) -> flint.arb:
        """An upper bound of |<g, delta>| over the box."""
        if self.g is None:
            return self.ctx._zero_arb
        s = self.ctx._zero_arb
        for gi, hi in zip(self.g, self.ctx.h):
            s = s + abs(gi) * hi
        return s

    def dev(self) -> flint.arb:
        """An upper bound of |value - c| over the box."""
        U = self._lin_bound()
        return U if self.r is None else U + self.r

    def range(self) -> flint.arb:
        """A ball enclosing every value of the model over the box (at the context's precision,
        also when called outside ``scope()``)."""
        if self.g is None and self.r is None:
            return self.c
        if flint.ctx.prec != self.ctx.prec:
            with self.ctx.scope():
                return self.c + flint.arb(0, self.dev().upper())
        return self.c + flint.arb(0, self.dev().upper())

    def is_const(self) -> bool:
        return self.g is None and self.r is None

    # --- arithmetic ------------------------------------------------------------------------
    def _coerce(self, o) -> "TM":
        if isinstance(o, TM):
            return o
        return self.ctx.convert(o)

    def __add__(self, o):
        o = self._coerce(o)
        g = _gadd(self.g, o.g)
        return TM(_box(self, o), self.c + o.c, g, _radd(self.r, o.r))

    __radd__ = __add__

    def __neg__(self):
        return TM(self.ctx, -self.c, None if self.g is None else tuple(-x for x in self.g), self.r)

    def __sub__(self, o):
        return self + (-self._coerce(o))

    def __rsub__(self, o):
        return self._coerce(o) + (-self)

    def __mul__(self, o):
        o = self._coerce(o)
        a, b = self, o
        if a.is_const():
            return b._scale(a.c)
        if b.is_const():
            return a._scale(b.c)
        La, Lb = a._lin_bound(), b._lin_bound()
        g = _gadd(None if a.g is None else tuple(x * b.c for x in a.g),
                  None if b.g is None else tuple(x * a.c for x in b.g))
        rem = La * Lb
        if a.r is not None:
            rem = rem + a.r * (abs(b.c) + Lb)
        if b.r is not None:
            rem = rem + b.r * (abs(a.c) + La)
        if a.r is not None and b.r is not None:
            rem = rem + a.r * b.r
        return TM(_box(a, b), a.c * b.c, g, _up(rem))

    __rmul__ = __mul__

    def _scale(self, k: flint.arb) -> "TM":
        g = None if self.g is None else tuple(x * k for x in self.g)
        r = None if self.r is None else _up(self.r * abs(k))
        return TM(self.ctx, self.c * k, g, r)

    def reciprocal(self) -> "TM":
        if self.is_const():
            return TM(self.ctx, 1 / self.c)
        rng = self.range()
        if rng.contains(0):
            raise Undecided("division by a Taylor model whose range contains 0")
        c = self.c
        inv = 1 / c
        g = None if self.g is None else tuple(-x * inv * inv for x in self.g)
        U = self.dev()
        min_abs = flint.arb(abs(rng).lower())
        rem = U * U / (min_abs * min_abs * min_abs)  # |f''(xi)/2| = 1/|xi|^3 on the range
        if self.r is not None:
            rem = rem + self.r * abs(inv * inv)  # the remainder's own first-order term
        return TM(self.ctx, inv, g, _up(rem))

    def __truediv__(self, o):
        o = self._coerce(o)
        if o.is_const():
            return self._scale(1 / o.c)
        return self * o.reciprocal()

    def __rtruediv__(self, o):
        return self._coerce(o) * self.reciprocal()

    def __pow__(self, n):
        if not isinstance(n, int) or n < 0:
            raise TypeError("Taylor models support non-negative integer powers only")
        out = self.ctx.one
        for _ in range(n):
            out = out * self
        return out

    def __abs__(self):
        return self.ctx.abs(self)

    def __repr__(self):
        return f"TM({self.range().str(10, radius=True)})"


def _box(a: TM, b: TM) -> "TaylorContext":
    """The context (box) of the result of an operation on ``a`` and ``b``.

    Only the gradient refers to a box (``_lin_bound`` reads its half-widths ``h``); a model
    without one (``c +- r``) means the same number in every box.  Such constants are shared
    between boxes: a model's weights are converted once per context name and precision
    (``Transformer.numeric``) and keep the context of the first box they were converted in.  So
    the box of a result is the box of the operand *with* a gradient -- taking the left operand's
    would bound ``constant + x`` with the half-widths of whichever box converted the constant
    first.  This keeps the enclosure independent of the evaluation history without converting
    the weights again for every box.  Two models with gradients over different boxes have no
    meaning together.
    """
    if a.g is None:
        return b.ctx
    if b.g is not None and b.ctx is not a.ctx:
        raise ValueError("Taylor models over different boxes cannot be combined")
    return a.ctx


def _gadd(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return tuple(x + y for x, y in zip(a, b))


def _radd(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return _up(a + b)


def _up(x: flint.arb) -> flint.arb:
    """An exact upper bound (a radius-0 ball) of a nonnegative quantity."""
    return flint.arb(x.upper())


class TaylorContext(Context):
    """First-order Taylor models over the box ``x0 +- h`` (exact rational centre and half-widths)."""

    name = "taylor"
    rigorous = True
    #: set to a number ``k``: a smooth unary function's model is replaced by its constant hull where
    #: the model's range is more than ``k`` times wider (:func:`symbounds.core.activations.taylor_unary`)
    hull_factor = None

    def __init__(self, prec: int, x0, h):
        self.prec = int(prec)
        self.ball = BallContext(self.prec)
        with self.ball.scope():
            self.x0 = [self.ball.convert(v) for v in x0]
            self.h = [self.ball.convert(v) for v in h]
            self._zero_arb = flint.arb(0)

    @contextlib.contextmanager
    def scope(self):
        with self.ball.scope():
            yield self

    def constants_context(self):
        return self.ball

    def affine_combination(self, c0, coeffs, xs):
        """``c0 + sum_k a_k x_k`` for constant models ``c0, a_k`` and models ``x_k``, built in
        one step (the hot loop of a box evaluation: the affine prefix at every token)."""
        if not (c0.is_const() and all(a.is_const() for a in coeffs)):
            return super().affine_combination(c0, coeffs, xs)
        c = c0.c
        g = None
        r = None
        for a, x in zip(coeffs, xs):
            k = a.c
            c = c + k * x.c
            if x.g is not None:
                gx = tuple(k * gi for gi in x.g)
                g = gx if g is None else tuple(p + q for p, q in zip(g, gx))
            if x.r is not None:
                r = _radd(r, _up(x.r * abs(k)))
        return TM(self, c, g, r)

    # --- construction ------------------------------------------------------------------------
    def const(self, b: flint.arb) -> TM:
        return TM(self, b)

    def rational(self, p, q=1):
        return TM(self, self.ball.rational(p, q))

    def _convert_native(self, v):
        if isinstance(v, TM):
            return v
        if isinstance(v, flint.arb):
            return TM(self, v)
        raise TypeError(f"cannot convert {type(v).__name__} to a Taylor model")

    def interval(self, lo, hi) -> TM:
        """A constant model (no gradient) whose ball encloses ``[lo, hi]`` (exact rationals,
        ``lo <= hi``): the same value at every point of the box."""
        return TM(self, self.ball.interval(lo, hi))

    def upper(self, x) -> TM:
        """A constant model: the exact upper end of ``x``'s range over the box."""
        x = self.convert(x)
        return TM(self, self.ball.upper(x.range()))

    def lower(self, x) -> TM:
        """A constant model: the exact lower end of ``x``'s range over the box."""
        x = self.convert(x)
        return TM(self, self.ball.lower(x.range()))

    def inputs(self) -> list[TM]:
        """The coordinates ``x_i = x0_i + delta_i`` as models."""
        d = len(self.x0)
        one, zero = flint.arb(1), flint.arb(0)
        return [TM(self, self.x0[i], tuple(one if k == i else zero for k in range(d))) for i in range(d)]

    def from_sympy(self, expr, memo=None, env=None):
        # Weights and constants: evaluate in balls (a model's range stands in for a symbol's value).
        benv = None if env is None else {k: (v.range() if isinstance(v, TM) else v) for k, v in env.items()}
        return TM(self, self.ball.from_sympy(expr, memo, benv))

    # --- functions ----------------------------------------------------------------------------
    def exp(self, a: TM) -> TM:
        with self.ball.scope():
            ec = a.c.exp()
            if a.is_const():
                return TM(self, ec)
            # e^{c+u} = e^c (1 + u + R), R = e^u - 1 - u in [0, e^U - 1 - U] for |u| <= U: the
            # remainder is one-sided, so the model is centred on its midpoint.
            g = None if a.g is None else tuple(x * ec for x in a.g)
            U = a._lin_bound()
            half = (U.expm1() - U) / 2
            rem = abs(ec) * half
            c = ec + ec * half
            if a.r is not None:  # the remainder of a itself, through the slope of exp on the range
                rem = rem + abs(ec) * (U + a.r).exp() * a.r
            return TM(a.ctx, c, g, _up(rem))  # the box of a's gradient (see _box)

    def pi(self):
        return TM(self, flint.arb.pi())

    def hull(self, rng: flint.arb) -> TM:
        """The constant model of the ball ``rng`` (the same enclosure at every point of the box)."""
        return TM(self, rng.mid(), None, flint.arb(rng.rad()))

    def relu(self, a: TM) -> TM:
        rng = a.range()
        if rng >= 0:
            return a
        if rng <= 0:
            return self.zero
        return self.hull(rng.max(flint.arb(0)))

    def max(self, a, b):
        a, b = self.convert(a), self.convert(b)
        diff = (a - b).range()
        if diff >= 0:
            return a
        if diff <= 0:
            return b
        return self.hull(a.range().max(b.range()))

    def min(self, a, b):
        a, b = self.convert(a), self.convert(b)
        diff = (a - b).range()
        if diff <= 0:
            return a
        if diff >= 0:
            return b
        return self.hull(a.range().min(b.range()))

    def abs(self, a):
        a = self.convert(a)
        rng = a.range()
        if rng >= 0:
            return a
        if rng <= 0:
            return -a
        return self.hull(abs(rng))

    # --- comparisons on ranges --------------------------------------------------------------------
    def lt(self, a, b):
        return self.ball.lt(flint.arb(0), (self.convert(b) - self.convert(a)).range())

    def le(self, a, b):
        return self.ball.le(flint.arb(0), (self.convert(b) - self.convert(a)).range())

    def is_zero(self, a) -> bool:
        if not isinstance(a, TM):
            return False
        return a.g is None and a.r is None and a.c.is_exact() and a.c.is_zero()

    def shift_point(self, scores):
        """The model of the score with the largest upper end: subtracting a *model* keeps the
        correlation, so only gradient differences enter the exponentials of a softmax."""
        best = max(scores, key=lambda s: s.range().upper())
        if best.is_const():
            return TM(self, best.c.mid())
        return best

    def argmax_set(self, scores):
        rngs = [s.range() for s in scores]
        return self.ball.argmax_set(rngs)

    def to_str(self, x, digits=20):
        return self.ball.to_str(x.range() if isinstance(x, TM) else x, digits)

    def to_fraction_bounds(self, x):
        return self.ball.to_fraction_bounds(x.range() if isinstance(x, TM) else x)
