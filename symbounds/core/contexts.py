"""Number systems ("contexts") in which one forward pass runs unchanged.

Following mpmath, every algorithm takes the arithmetic as its first argument:
``forward(ctx, model, x)``.  Four contexts share one small interface:

=========  ==========================  ===========  ==========================================
name       number type                 rigorous     use
=========  ==========================  ===========  ==========================================
``exact``  ``flint.fmpq`` (rationals)  yes          hardmax and piecewise-linear parts; refuses
                                                    ``exp``, ``log``, ``sin`` ... (raises
                                                    :class:`ExactUnsupported`)
``ball``   ``flint.arb`` (Arb balls)   yes          the certifying context: every result
                                                    encloses the true value
``mp``     ``mpmath`` ``mpf``          no           high-precision evidence (a private
                                                    ``mpmath.MPContext``, so no global leaks)
``fp``     Python ``float`` (IEEE 64)  no           exists only to show what float64 does
=========  ==========================  ===========  ==========================================

Comparisons answer ``True``, ``False`` or ``None`` ("cannot tell").  Only the ball context ever
answers ``None`` for finite numbers; ``fp`` answers ``None`` when a NaN is involved.

Intervals and bounds, so that code never asks which context it runs in: ``interval(lo, hi)`` is
a number standing for the exact interval ``[lo, hi]`` (a ball enclosing it; in ``exact`` only a
point ``lo = hi``, anything longer raises :class:`ExactUnsupported`; in ``mp`` / ``fp`` the
midpoint, which is no enclosure), ``upper(x)`` / ``lower(x)`` bound ``x`` from above / below (the
ball's exact endpoint; ``x`` itself in ``exact``, ``mp`` and ``fp``).

Precision is scoped: python-flint keeps its precision in a global (``flint.ctx.prec``); every
evaluation that touches balls runs inside ``with ctx.scope():``, which sets the context's own
precision and restores the previous value on exit, so precision never leaks between calls.

Conversion from SymPy (:meth:`Context.from_sympy`) walks the expression tree and evaluates each
node in the context: rationals become exact rationals or correctly rounded balls, ``pi`` and
``sin(pi*q)`` use Arb's dedicated functions, and no Python float is ever created on the way
(except in ``fp``, by definition).
"""

from __future__ import annotations

import contextlib
import functools
import math
from fractions import Fraction

import flint
import mpmath
import sympy

from .exact import arb_to_fraction, as_fraction, parse_number

__all__ = [
    "Context",
    "ExactContext",
    "BallContext",
    "MPContext",
    "FPContext",
    "ExactUnsupported",
    "Undecided",
    "UndefinedValue",
    "make_context",
    "MIN_PREC",
    "MAX_PREC",
]

#: Below this many bits a "certificate" is not worth the name; the CLI refuses it.
MIN_PREC = 24
#: The largest working precision any command or certificate takes, in bits.
MAX_PREC = 1 << 16


class ExactUnsupported(ArithmeticError):
    """The exact context was asked for a transcendental operation (exp, log, sin, ...)."""


class Undecided(ArithmeticError):
    """A branch in the computation (e.g. a hardmax argmax) cannot be decided at this precision."""


def _as_fmpq(v) -> flint.fmpq:
    """An exact rational from int, Fraction, fmpq, fmpz or a SymPy Rational; anything else fails."""
    if isinstance(v, flint.fmpq):
        return v
    if isinstance(v, (int, flint.fmpz)) and not isinstance(v, bool):
        return flint.fmpq(v)
    if isinstance(v, Fraction):
        return flint.fmpq(v.numerator, v.denominator)
    if isinstance(v, sympy.Rational):
        return flint.fmpq(int(v.p), int(v.q))
    raise TypeError(f"not an exact rational: {v!r}")


def _interval_ends(lo, hi) -> tuple[flint.fmpq, flint.fmpq]:
    """``lo, hi`` as exact rationals, checked ``lo <= hi``."""
    lo, hi = _as_fmpq(lo), _as_fmpq(hi)
    if lo > hi:
        raise ValueError(f"empty interval [{lo}, {hi}]")
    return lo, hi


def _bits(prec) -> int:
    """A working precision in bits (at least 2)."""
    if prec < 2:
        raise ValueError("precision must be at least 2 bits")
    return int(prec)


class Context:
    """Shared interface.  Subclasses provide the number type and the elementary functions."""

    name: str = "?"
    rigorous: bool = False
    exact: bool = False
    prec: int | None = None

    # --- construction -------------------------------------------------------------------------
    def rational(self, p: int, q: int = 1):
        raise NotImplementedError

    def convert(self, v):
        """A context number from an int, Fraction, fmpq, SymPy expression, an exact number string
        (``"3"``, ``"-7/8"``, ``"0.1"`` read as 1/10, ``"1e-3"``: :func:`symbounds.core.exact.parse_number`)
        or a context number.  A Python float is refused (it is not the number it was written as)."""
        if isinstance(v, str):
            v = parse_number(v, "input")
        if isinstance(v, sympy.Basic):
            return self.from_sympy(v)
        if isinstance(v, bool):
            raise TypeError("bool is not a number here")
        if isinstance(v, (int, Fraction, flint.fmpq, flint.fmpz)):
            q = _as_fmpq(v)
            return self.rational(int(q.p), int(q.q))
        if isinstance(v, float):
            raise TypeError("float inputs are not exact; pass a Fraction, a string or a SymPy number")
        return self._convert_native(v)

    def _convert_native(self, v):
        raise TypeError(f"cannot convert {type(v).__name__} to the {self.name} context")

    def native(self, v):
        """``v`` when it is already a number of this context (an arb, an mpf, a float of the
        float context, a Taylor model of its box), a TypeError otherwise; exact numbers go
        through :meth:`convert`."""
        return self._convert_native(v)

    def from_sympy(self, expr, memo: dict | None = None, env: dict | None = None):
        """Evaluate a SymPy expression (numbers, pi, + * ^, exp, log, sin, cos, sqrt, Abs, Min, Max).

        ``env`` maps free symbols to context numbers (e.g. the coordinates of a point); ``memo``
        caches sub-expressions across calls (only valid for one ``env``).
        """
        memo = {} if memo is None else memo
        return _SympyEvaluator(self, memo, env or {}).value(expr)

    def interval(self, lo, hi):
        """A number of this context for the closed interval ``[lo, hi]`` (exact rationals,
        ``lo <= hi``).  Rigorous contexts return an enclosure (every point of ``[lo, hi]`` lies
        in it); see each context for what it returns."""
        raise NotImplementedError

    def upper(self, x):
        """An upper bound of ``x`` (of every value ``x`` stands for), as a number of this context."""
        raise NotImplementedError

    def lower(self, x):
        """A lower bound of ``x`` (of every value ``x`` stands for), as a number of this context."""
        raise NotImplementedError

    @property
    def zero(self):
        return self.rational(0)

    @property
    def one(self):
        return self.rational(1)

    # --- scope ----------------------------------------------------------------------------------
    @contextlib.contextmanager
    def scope(self):
        """Run the body at this context's precision (no-op where there is no global state)."""
        yield self

    def affine_combination(self, c0, coeffs, xs):
        """``c0 + sum_k coeffs[k] * xs[k]`` (contexts may build it in one step)."""
        v = c0
        for a, x in zip(coeffs, xs):
            v = v + a * x
        return v

    def constants_context(self) -> "Context":
        """The context in which input-independent parts are computed (itself, except for
        contexts of models over a box, which borrow their ball context's)."""
        return self

    # --- matrix products --------------------------------------------------------------------------
    def matrix(self, rows):
        """``rows`` (a list of rows of this context's numbers) as an operand of :meth:`matmul`,
        converted once when it is the factor of several products."""
        return rows

    def matmul(self, A, B) -> list:
        """``A @ B`` as a list of rows, for ``A`` and ``B`` lists of rows or :meth:`matrix`
        operands: row by row, ``out[r] = sum_c A[r][c] B[c]`` summed in ascending ``c``, exact
        zeros of ``A`` skipped (``0 * finite`` is exactly 0).  A context with a matrix type of its
        own (Arb balls) multiplies in it."""
        n = len(B[0]) if B else 0
        zero = self.zero
        out = []
        for row in A:
            acc = [zero] * n
            for a, brow in zip(row, B):
                if self.is_zero(a):
                    continue
                acc = [s + a * b for s, b in zip(acc, brow)]
            out.append(acc)
        return out

    # --- elementary functions (overridden where they exist) ---------------------------------------
    def exp(self, x):
        raise ExactUnsupported(f"{self.name} context cannot evaluate exp")

    def log(self, x):
        raise ExactUnsupported(f"{self.name} context cannot evaluate log")

    def sqrt(self, x):
        raise ExactUnsupported(f"{self.name} context cannot evaluate sqrt")

    def sin(self, x):
        raise ExactUnsupported(f"{self.name} context cannot evaluate sin")

    def cos(self, x):
        raise ExactUnsupported(f"{self.name} context cannot evaluate cos")

    def sin_pi_q(self, q: flint.fmpq):
        """sin(pi*q) for an exact rational q."""
        return self.sin(self.pi() * self.rational(int(q.p), int(q.q)))

    def cos_pi_q(self, q: flint.fmpq):
        return self.cos(self.pi() * self.rational(int(q.p), int(q.q)))

    def pi(self):
        raise ExactUnsupported(f"{self.name} context cannot represent pi")

    def pow(self, x, e):
        """x**e; integer e stays in the field, otherwise exp(e*log x) for x > 0."""
        if isinstance(e, int):
            return x**e
        return self.exp(e * self.log(x))

    def abs(self, x):
        return abs(x)

    def max(self, a, b):
        """Enclosure-correct maximum (never a branch on an undecided comparison)."""
        return a if a >= b else b

    def min(self, a, b):
        return a if a <= b else b

    def relu(self, x):
        return self.max(self.zero, x)

    # --- three-valued comparisons --------------------------------------------------------------
    def lt(self, a, b) -> bool | None:
        return bool(a < b)

    def le(self, a, b) -> bool | None:
        return bool(a <= b)

    def gt(self, a, b) -> bool | None:
        return self.lt(b, a)

    def ge(self, a, b) -> bool | None:
        return self.le(b, a)

    def is_zero(self, a) -> bool:
        """True only when a is *exactly* zero (for a ball: midpoint 0 and radius 0)."""
        return a == 0

    # --- helpers for the forward pass -----------------------------------------------------------
    def shift_point(self, scores):
        """An exactly representable number close to max(scores), subtracted before exp in a softmax."""
        best = scores[0]
        for s in scores[1:]:
            if s > best:
                best = s
        return best

    def argmax_set(self, scores) -> list[int]:
        """Indices attaining the maximum; raises :class:`Undecided` if the set cannot be decided."""
        best = self.shift_point(scores)
        return [i for i, s in enumerate(scores) if s == best]

    # --- reporting ------------------------------------------------------------------------------
    def to_str(self, x, digits: int = 20) -> str:
        return str(x)

    def to_fraction_bounds(self, x) -> tuple[Fraction, Fraction]:
        """Exact lower and upper bounds of a context number (for rigorous contexts)."""
        raise NotImplementedError

    def __repr__(self):
        return f"<{type(self).__name__} prec={self.prec}>"


class ExactContext(Context):
    """Exact rationals (``flint.fmpq``).  Transcendental functions raise :class:`ExactUnsupported`."""

    name = "exact"
    rigorous = True
    exact = True

    def rational(self, p, q=1):
        return flint.fmpq(p, q)

    def _convert_native(self, v):
        raise TypeError(f"cannot convert {type(v).__name__} to an exact rational")

    def sqrt(self, x):
        # sqrt of a perfect-square rational stays exact; anything else is not a rational.
        p, q = int(x.p), int(x.q)
        if p >= 0:
            rp, rq = math.isqrt(p), math.isqrt(q)
            if rp * rp == p and rq * rq == q:
                return flint.fmpq(rp, rq)
        raise ExactUnsupported("exact context cannot evaluate an irrational sqrt")

    def interval(self, lo, hi):
        """The exact number ``lo`` when ``lo == hi``; a rational cannot stand for a longer
        interval, so ``lo < hi`` raises :class:`ExactUnsupported` (like any operation whose result
        is not one rational)."""
        lo, hi = _interval_ends(lo, hi)
        if lo != hi:
            raise ExactUnsupported(f"the exact context has no number for the interval [{lo}, {hi}]")
        return lo

    def upper(self, x):
        """``x`` itself (an exact number is its own bound)."""
        return x

    def lower(self, x):
        return x

    def to_str(self, x, digits=20):
        return f"{x.p}/{x.q}" if x.q != 1 else str(x.p)

    def to_fraction_bounds(self, x):
        f = as_fraction(x)
        return f, f


class BallContext(Context):
    """Arb balls (python-flint ``arb``) at ``prec`` bits: every result encloses the truth."""

    name = "ball"
    rigorous = True

    def __init__(self, prec: int = 128):
        self.prec = _bits(prec)
        # exact balls, valid at every precision: the forward pass asks for them in its inner loops
        self._zero, self._one = flint.arb(0), flint.arb(1)

    @property
    def zero(self):
        return self._zero

    @property
    def one(self):
        return self._one

    @contextlib.contextmanager
    def scope(self):
        saved = flint.ctx.prec
        flint.ctx.prec = self.prec
        try:
            yield self
        finally:
            flint.ctx.prec = saved

    def rational(self, p, q=1):
        with self.scope():
            return flint.arb(flint.fmpq(p, q))

    def matrix(self, rows):
        return rows if isinstance(rows, flint.arb_mat) else flint.arb_mat(rows)

    def matmul(self, A, B) -> list:
        """``A @ B`` by Arb's matrix product (call within :meth:`scope`): each entry a ball
        containing the exact sum of products of the entries' values."""
        return (self.matrix(A) * self.matrix(B)).tolist()

    def _convert_native(self, v):
        if isinstance(v, flint.arb):
            return v
        raise TypeError(f"cannot convert {type(v).__name__} to a ball")

    def exp(self, x):
        return x.exp()

    def log(self, x):
        return x.log()

    def sqrt(self, x):
        return x.sqrt()

    def sin(self, x):
        return x.sin()

    def cos(self, x):
        return x.cos()

    def sin_pi_q(self, q):
        return flint.arb.sin_pi_fmpq(q)

    def cos_pi_q(self, q):
        return flint.arb.cos_pi_fmpq(q)

    def pi(self):
        return flint.arb.pi()

    def pow(self, x, e):
        if isinstance(e, int):
            return x**e
        return x**e  # arb ** arb: exp(e log x), enclosure-correct for x > 0

    def abs(self, x):
        return abs(x)

    def max(self, a, b):
        return a.max(b)

    def min(self, a, b):
        return a.min(b)

    def interval(self, lo, hi):
        """A ball containing every point of ``[lo, hi]`` (the union of the balls of ``lo`` and
        ``hi``, rounded outwards at this precision)."""
        lo, hi = _interval_ends(lo, hi)
        with self.scope():
            return flint.arb(lo).union(flint.arb(hi))

    def upper(self, x):
        """The exact upper endpoint of the ball (a radius-0 ball, rounded up at this precision)."""
        with self.scope():
            return flint.arb(x.upper())

    def lower(self, x):
        """The exact lower endpoint of the ball (rounded down at this precision)."""
        with self.scope():
            return flint.arb(x.lower())

    def lt(self, a, b):
        if a < b:
            return True
        if a >= b:
            return False
        return None

    def le(self, a, b):
        if a <= b:
            return True
        if a > b:
            return False
        return None

    def is_zero(self, a):
        return a.is_exact() and a.is_zero()

    def shift_point(self, scores):
        # Shift by an exact number (the midpoint of the ball with the largest upper end), not by
        # a ball: subtracting a ball would add its radius to every term of the softmax.
        best = scores[0]
        for s in scores[1:]:
            if s.upper() > best.upper():
                best = s
        return best.mid()

    def argmax_set(self, scores):
        hi = max(range(len(scores)), key=lambda i: scores[i].upper())
        top = scores[hi]
        maybe = [i for i, s in enumerate(scores) if not (s < top)]
        if len(maybe) == 1:
            return maybe
        if all(scores[i].is_exact() for i in maybe) and all(scores[i] == top for i in maybe):
            return maybe
        raise Undecided("hardmax argmax cannot be decided at this precision")

    def to_str(self, x, digits=20):
        return x.str(digits, radius=True)

    def to_fraction_bounds(self, x):
        # exact endpoints mid -+ rad (independent of the ambient flint.ctx.prec)
        mid = arb_to_fraction(x.mid())
        rad = arb_to_fraction(x.rad())
        return mid - rad, mid + rad


class _PointContext(Context):
    """A non-rigorous context: numbers are points, so an interval is represented by its midpoint
    and a point is its own upper and lower bound (evidence, never a proof)."""

    def interval(self, lo, hi):
        """The midpoint ``(lo + hi) / 2`` rounded to this context: a representative point, *not*
        an enclosure (this context is evidence, never a proof)."""
        lo, hi = _interval_ends(lo, hi)
        return self.convert((lo + hi) / 2)

    def upper(self, x):
        """``x`` itself (a point: not a rigorous bound)."""
        return x

    def lower(self, x):
        """``x`` itself (a point: not a rigorous bound)."""
        return x


class MPContext(_PointContext):
    """mpmath at ``prec`` bits in a private ``mpmath.MPContext`` (evidence, never a proof)."""

    name = "mp"
    rigorous = False

    def __init__(self, prec: int = 128):
        self.prec = _bits(prec)
        self._mp = mpmath.MPContext()
        self._mp.prec = self.prec

    @property
    def mp(self):
        """This context's own ``mpmath.MPContext`` (for functions the interface does not name)."""
        return self._mp

    def rational(self, p, q=1):
        return self._mp.mpf(p) / q if q != 1 else self._mp.mpf(p)

    def _convert_native(self, v):
        if hasattr(v, "_mpf_"):  # an mpf of any mpmath context (each context has its own class)
            return self._mp.mpf(v)
        raise TypeError(f"cannot convert {type(v).__name__} to mpf")

    def exp(self, x):
        return self._mp.exp(x)

    def log(self, x):
        return self._mp.log(x)

    def sqrt(self, x):
        return self._mp.sqrt(x)

    def sin(self, x):
        return self._mp.sin(x)

    def cos(self, x):
        return self._mp.cos(x)

    def sin_pi_q(self, q):
        return self._mp.sinpi(self._mp.mpf(int(q.p)) / int(q.q))

    def cos_pi_q(self, q):
        return self._mp.cospi(self._mp.mpf(int(q.p)) / int(q.q))

    def pi(self):
        return +self._mp.pi

    def pow(self, x, e):
        return x**e

    def to_str(self, x, digits=20):
        return self._mp.nstr(x, digits)


class FPContext(_PointContext):
    """IEEE float64.  Overflow gives ``inf`` and underflow ``0.0``, as float64 code would see them."""

    name = "fp"
    rigorous = False
    prec = 53

    def rational(self, p, q=1):
        # int/int true division in Python is correctly rounded; huge p, q still work.
        try:
            return p / q if q != 1 else float(p)
        except OverflowError:
            return math.inf if (p > 0) == (q > 0) else -math.inf

    def _convert_native(self, v):
        # reached for context numbers only: ``convert`` refuses a float as an *input* before this
        if isinstance(v, float):
            return v
        raise TypeError(f"cannot convert {type(v).__name__} to float")

    def exp(self, x):
        try:
            return math.exp(x)
        except OverflowError:
            return math.inf

    def log(self, x):
        if x < 0 or math.isnan(x):
            return math.nan
        if x == 0:
            return -math.inf
        return math.log(x)

    def sqrt(self, x):
        return math.sqrt(x) if x >= 0 else math.nan

    def sin(self, x):
        return math.sin(x) if math.isfinite(x) else math.nan

    def cos(self, x):
        return math.cos(x) if math.isfinite(x) else math.nan

    def pi(self):
        return math.pi

    def pow(self, x, e):
        try:
            return x**e
        except OverflowError:
            odd = float(e).is_integer() and int(e) % 2 == 1
            return -math.inf if (x < 0 and odd) else math.inf
        except ZeroDivisionError:
            return math.inf

    def max(self, a, b):
        if math.isnan(a) or math.isnan(b):
            return math.nan
        return a if a >= b else b

    def min(self, a, b):
        if math.isnan(a) or math.isnan(b):
            return math.nan
        return a if a <= b else b

    def argmax_set(self, scores):
        if any(math.isnan(s) for s in scores):
            raise Undecided("a NaN score: the float64 argmax is undefined")
        return super().argmax_set(scores)

    def lt(self, a, b):
        if math.isnan(a) or math.isnan(b):
            return None
        return a < b

    def le(self, a, b):
        if math.isnan(a) or math.isnan(b):
            return None
        return a <= b

    def to_str(self, x, digits=17):
        return repr(x)


def make_context(name: str, prec: int | None = None) -> Context:
    """Build a context by name (``exact``, ``ball``, ``mp``, ``fp``)."""
    if name == "exact":
        return ExactContext()
    if name == "ball":
        return BallContext(prec or 128)
    if name == "mp":
        return MPContext(prec or 128)
    if name == "fp":
        return FPContext()
    raise ValueError(f"unknown context {name!r} (use exact, ball, mp or fp)")


class UndefinedValue(ValueError):
    """A rigorous context found an expression undefined at the given values: a division by exactly
    zero, a logarithm of a number <= 0, a non-integer power of a negative number (bad input)."""


@functools.lru_cache(maxsize=4096)
def nonnegative_by_construction(e) -> bool:
    """True when the SymPy expression ``e`` is >= 0 wherever it is defined, by its form alone:
    ``|u|``, ``u^(2k)``, ``sqrt(u)``, ``exp(u)``, numbers >= 0, ``pi``, sums and products of such
    terms, ``max`` with one such argument, ``min`` of such arguments.  Symbols (whatever their
    assumptions) are not, so the answer never rests on a declaration."""
    if e.is_Rational:
        return bool(e >= 0)
    if e is sympy.pi or e is sympy.E or isinstance(e, (sympy.Abs, sympy.exp)):
        return True
    if isinstance(e, sympy.Pow):
        base, ex = e.args
        if ex.is_Rational and (ex.q % 2 == 0 or (ex.q == 1 and ex.p % 2 == 0)):
            return True  # u^(p/q) with q even is a root (>= 0); u^(2k) is a square
        return nonnegative_by_construction(base)
    if isinstance(e, (sympy.Add, sympy.Mul, sympy.Min)):
        return all(nonnegative_by_construction(a) for a in e.args)
    if isinstance(e, sympy.Max):
        return any(nonnegative_by_construction(a) for a in e.args)
    return False


@functools.lru_cache(maxsize=4096)
def positive_by_construction(e) -> bool:
    """True when ``e`` is > 0 wherever it is defined, by its form alone: ``exp(u)``, numbers > 0,
    ``pi``, a sum of terms >= 0 with one > 0, a product of terms > 0, a power of a term > 0."""
    if e.is_Rational:
        return bool(e > 0)
    if e is sympy.pi or e is sympy.E or isinstance(e, sympy.exp):
        return True
    if isinstance(e, sympy.Pow):
        return positive_by_construction(e.args[0])
    if isinstance(e, sympy.Add):
        return (all(nonnegative_by_construction(a) for a in e.args)
                and any(positive_by_construction(a) for a in e.args))
    if isinstance(e, sympy.Mul):
        return all(positive_by_construction(a) for a in e.args)
    return False


class _SympyEvaluator:
    """Evaluate a SymPy tree node by node in a context; shared sub-expressions are computed once.

    Partial operations are enclosed on their true domain.  A sub-expression that is >= 0 by its
    form (:func:`nonnegative_by_construction`, e.g. ``|x - 1/2|``) has the negative part of its ball
    discarded before a root or a non-integer power is taken (Arb's ``arb_nonnegative_part``), so
    ``sqrt(|x - 1/2|)`` at ``x = 1/2`` is a ball ``[0, r]``, not NaN; any other ball straddling 0
    under a root stays NaN (undecided).  In a rigorous context a division by exactly zero, a
    logarithm of a number known to be <= 0 and a non-integer power of a number known to be < 0
    raise :class:`UndefinedValue` naming the values of the symbols and the sub-expression.
    """

    def __init__(self, ctx: Context, memo: dict, env: dict):
        self.ctx = ctx
        self.memo = memo
        self.env = env

    def value(self, e):
        try:
            return self.memo[e]
        except (KeyError, TypeError):
            pass
        with self.ctx.scope():
            v = self._eval(e)
        self.memo[e] = v
        return v

    def _eval(self, e):
        ctx = self.ctx
        if isinstance(e, (int, Fraction, flint.fmpq, flint.fmpz)) and not isinstance(e, bool):
            return ctx.convert(e)
        if not isinstance(e, sympy.Basic):
            raise TypeError(f"cannot evaluate {type(e).__name__}")
        if e.is_Rational:
            return ctx.rational(int(e.p), int(e.q))
        if e.is_Symbol:
            try:
                return self.env[e]
            except KeyError:
                raise TypeError(f"no value for the symbol {e}") from None
        if e is sympy.pi:
            return ctx.pi()
        if e is sympy.E:
            return ctx.exp(ctx.one)
        if e.is_Float:
            raise TypeError("SymPy Float found in an exact expression; use Rational")
        if isinstance(e, sympy.Add):
            acc = self.value(e.args[0])
            for a in e.args[1:]:
                acc = acc + self.value(a)
            return acc
        if isinstance(e, sympy.Mul):
            acc = self.value(e.args[0])
            for a in e.args[1:]:
                acc = acc * self.value(a)
            return acc
        if isinstance(e, sympy.Pow):
            base, ex = e.args
            if ex.is_Integer:
                n = int(ex)
                b = self.value(base)
                if n < 0:
                    self._check(ctx.is_zero(b), e, "divides by zero")
                return ctx.pow(b, n) if n >= 0 else ctx.one / ctx.pow(b, -n)
            b = self._root_base(base, e)
            if ex.is_number and ex.is_negative:
                self._check(ctx.is_zero(b), e, "divides by zero")
            if ex == sympy.Rational(1, 2):
                return ctx.sqrt(b)
            if ex == sympy.Rational(-1, 2):
                return ctx.one / ctx.sqrt(b)
            return ctx.pow(b, self.value(ex))
        if isinstance(e, (sympy.sin, sympy.cos)):
            arg = e.args[0]
            q = _rational_multiple_of_pi(arg)
            if q is not None:
                return ctx.sin_pi_q(q) if isinstance(e, sympy.sin) else ctx.cos_pi_q(q)
            v = self.value(arg)
            return ctx.sin(v) if isinstance(e, sympy.sin) else ctx.cos(v)
        if isinstance(e, sympy.exp):
            return ctx.exp(self.value(e.args[0]))
        if isinstance(e, sympy.log):
            if len(e.args) != 1:
                raise TypeError("log with a base is not supported")
            a = self.value(e.args[0])
            self._check(ctx.rigorous and ctx.le(a, ctx.zero) is True, e, "takes the logarithm of a number <= 0")
            return ctx.log(a)
        if isinstance(e, sympy.Abs):
            return ctx.abs(self.value(e.args[0]))
        if isinstance(e, (sympy.Min, sympy.Max)):
            vals = [self.value(a) for a in e.args]
            f = ctx.min if isinstance(e, sympy.Min) else ctx.max
            acc = vals[0]
            for v in vals[1:]:
                acc = f(acc, v)
            return acc
        raise TypeError(f"cannot evaluate {type(e).__name__} in the {ctx.name} context")

    def _root_base(self, base, node):
        """The base of a non-integer power, on its true domain (see the class docstring)."""
        ctx, b = self.ctx, self.value(base)
        if isinstance(b, flint.arb) and nonnegative_by_construction(base):
            with ctx.scope():
                return b.nonnegative_part()
        self._check(ctx.rigorous and ctx.lt(b, ctx.zero) is True, node, "takes a root of a negative number")
        return b

    def _check(self, undefined: bool, node, what: str) -> None:
        if undefined and self.ctx.rigorous:
            raise UndefinedValue(f"undefined at {self._where()}: {_short(node)} {what}")

    def _where(self) -> str:
        def show(v):
            if isinstance(v, flint.arb) and v.is_exact():
                return str(arb_to_fraction(v))
            if isinstance(v, flint.fmpq):
                return str(Fraction(int(v.p), int(v.q)))
            return self.ctx.to_str(v, 10) if hasattr(self.ctx, "to_str") else str(v)

        key = lambda s: (len(s.name), s.name)
        syms = sorted((s for s in self.env if isinstance(s, sympy.Symbol)), key=key)
        return ", ".join(f"{s} = {show(self.env[s])}" for s in syms) or "a constant"


def _short(e, n: int = 60) -> str:
    text = str(e)
    return text if len(text) <= n else text[: n - 3] + "..."


def _rational_multiple_of_pi(arg) -> flint.fmpq | None:
    """q if arg == q*pi with q rational, else None."""
    if arg is sympy.pi:
        return flint.fmpq(1)
    if isinstance(arg, sympy.Mul) and len(arg.args) == 2:
        a, b = arg.args
        if b is sympy.pi and a.is_Rational:
            return flint.fmpq(int(a.p), int(a.q))
    return None
