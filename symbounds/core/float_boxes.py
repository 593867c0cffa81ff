"""The network over many boxes at once: first-order Taylor models in outward-rounded float64.

The same enclosure as :mod:`symbounds.core.taylor` (a number over a box ``x0 +- h`` is
``c + <g, delta> + [-r, r]`` for every ``|delta_i| <= h_i``; products, ``exp``, ``1/b`` and ReLU
with the remainders written there), but each quantity is a NumPy array over a batch of boxes and
over the tokens, and every float operation is rounded outward (:mod:`symbounds.core.outward`):
the coefficients ``c`` and ``g`` are plain doubles, and every rounding error, times the half-width
it multiplies, is added to the remainder ``r``, itself computed upward.  So the model encloses the
exact network on every box of the batch, like the Arb one, at a fraction of its cost: one NumPy
pass per operation instead of one Python object per scalar.

Where float64 cannot decide (a denominator whose range contains 0, a non-finite value, a bound
too wide for the claim), the caller falls back to the Arb Taylor models, box by box
(:func:`symbounds.core.boxes.box_bounds`).

The pass is the second evaluator of the layers of :mod:`symbounds.core.layers`: its layer records
(:mod:`symbounds.core.float_layers`) are those classes in float balls, and :class:`FloatBoxOps`
implements the evaluator operations over a batch, so the attention and feed-forward formulas are
the layers' one ``apply``, walked as :func:`symbounds.core.transformer.forward` walks them.  Its
own steps are the embedding over the boxes, the composition of the affine prefix and the readout;
the compiled kernel (:mod:`symbounds.core.fused_boxes`) is a shortcut for the pass after the prefix.

Structure found from the weights (:class:`~symbounds.core.structure.ModelStructure`):

* the *affine prefix* ``Z(x) = F_0 + sum_i x_i F_i`` (leading layers affine in ``x``) is computed
  once, as float intervals at ``x = 0`` and ``x = e_i``; a head whose scores are input
  independent computes its attention weights once for all those points;
* readout pruning: from the last attention layer on, only the readout's column is evaluated;
* linear ReLU pairs ``relu(y) - relu(-y)`` are evaluated as ``y``; silent heads are skipped.

Supported: vector-input models with a readout, softmax attention and feed-forward layers.  Anything
else (hardmax attention, token input) makes :func:`evaluator` return None, and the Arb path runs.
"""

from __future__ import annotations

import math
from fractions import Fraction

import flint
import numpy as np
import sympy

from . import float_shared, fused_boxes
from . import outward as fo
from .contexts import BallContext
from .exact import arb_to_fraction, as_fraction
from .float_layers import FloatAttention, FloatFeedForward, FloatHead
from .layers import Run
from .network import Attention
from .transformer import Transformer

__all__ = ["FTM", "LN_TINY", "TINY", "FloatBoxEvaluator", "FloatBoxOps", "evaluator"]

#: Largest number of array entries one batch may create in its widest operation.
_BATCH_ENTRIES = 1 << 22


class FTM:
    """Arrays ``c + <G, delta> + [-r, r]``: ``c`` and ``r`` of shape ``(B,) + S``, ``G`` of shape
    ``(B, d) + S`` or None (the same value on the whole box: an interval ``c +- r``)."""

    __slots__ = ("G", "c", "r")

    def __init__(self, c, G, r):
        self.c, self.G, self.r = c, G, r

    def __getitem__(self, idx):
        """Entries ``idx`` of the shape ``S`` (the batch axis is kept)."""
        idx = idx if isinstance(idx, tuple) else (idx,)
        G = None if self.G is None else self.G[(slice(None), slice(None)) + idx]
        return FTM(self.c[(slice(None),) + idx], G, self.r[(slice(None),) + idx])


class _Boxes:
    """Half-widths ``h`` (shape ``(B, d)``) of a batch of boxes, and the helpers that need them."""

    def __init__(self, h):
        self.h = h
        self.d = h.shape[1]
        #: boxes on which some step could not be enclosed (a denominator's range contains 0)
        self.bad = np.zeros(h.shape[0], dtype=bool)

    def hx(self, ndim: int):
        """``h`` shaped to broadcast against a gradient of ``ndim`` dimensions ``(B, d) + S``."""
        return self.h.reshape(self.h.shape + (1,) * (ndim - 2))

    def lin(self, G, shape):
        """An upper bound of ``|<G, delta>|`` over the box (zeros for ``G = None``)."""
        if G is None:
            return np.zeros(shape)
        return fo.sum_up(fo.up(np.abs(G) * self.hx(G.ndim)), axis=1)

    def dev(self, a: FTM):
        """An upper bound of ``|value - c|``."""
        return fo.up(self.lin(a.G, a.c.shape) + a.r)

    def range(self, a: FTM):
        """``(lo, hi)`` with ``lo <= value <= hi`` over the box."""
        dv = self.dev(a)
        return fo.down(a.c - dv), fo.up(a.c + dv)

    def fold(self, c, G, r, *errs):
        """The model ``c + <G, delta> + [-R, R]``, with ``R = r`` plus the rounding errors:
        ``errs`` alternate (error of c, error of G); a G error counts times ``h``."""
        for e_c, e_G in zip(errs[0::2], errs[1::2]):
            if e_c is not None:
                r = fo.up(r + e_c)
            if e_G is not None:
                r = fo.up(r + self.lin(e_G, r.shape))
        return FTM(c, G, r)

    # --- arithmetic -----------------------------------------------------------------------------
    def add(self, a: FTM, b: FTM, sign: float = 1.0) -> FTM:
        """``a + b`` (``a - b`` for ``sign = -1``), with broadcasting."""
        c = a.c + sign * b.c
        if a.G is None and b.G is None:
            G = eG = None
        else:
            G = a.G if b.G is None else (sign * b.G if a.G is None else a.G + sign * b.G)
            eG = fo.err(G) if (a.G is not None and b.G is not None) else None
            G = np.broadcast_to(G, np.broadcast_shapes(G.shape[:2] + c.shape[1:], G.shape))
        r = fo.up(a.r + b.r)
        return self.fold(c, G, np.broadcast_to(r, c.shape), fo.err(c), eG)

    def mul(self, a: FTM, b: FTM) -> FTM:
        """``a * b`` elementwise (broadcasting): ``c = ca cb``, ``g = ga cb + gb ca`` and the
        remainder ``|La| |Lb| + ra (|cb| + Lb) + rb (|ca| + La) + ra rb``."""
        c = a.c * b.c
        La, Lb = self.lin(a.G, a.c.shape), self.lin(b.G, b.c.shape)
        G, eG = None, None
        if a.G is not None:
            p = a.G * _grad_axis(b.c)
            G, eG = p, fo.err(p)
        if b.G is not None:
            q = b.G * _grad_axis(a.c)
            if G is None:
                G, eG = q, fo.err(q)
            else:
                G = G + q
                eG = fo.up(fo.up(eG + fo.err(q)) + fo.err(G))
        ab_c, ab_a = np.abs(b.c), np.abs(a.c)
        rem = fo.up(La * Lb)
        rem = fo.up(rem + fo.up(a.r * fo.up(ab_c + Lb)))
        rem = fo.up(rem + fo.up(b.r * fo.up(ab_a + La)))
        rem = fo.up(rem + fo.up(a.r * b.r))
        return self.fold(c, G, rem, fo.err(c), eG)

    def sum(self, a: FTM, axis: int) -> FTM:
        """The sum over ``axis`` of the shape ``S`` (0-based, after the batch axis)."""
        ax = axis + 1
        n = a.c.shape[ax]
        c = a.c.sum(axis=ax)
        e_c = fo.up(fo.sum_up(np.abs(a.c), ax) * float(fo.up(2 * n * fo.U)))
        G = e_G = None
        if a.G is not None:
            G = a.G.sum(axis=ax + 1)
            e_G = fo.up(fo.sum_up(np.abs(a.G), ax + 1) * float(fo.up(2 * n * fo.U)))
        return self.fold(c, G, fo.sum_up(a.r, ax), e_c, e_G)

    def linear(self, W, a: FTM) -> FTM:
        """``W @ a`` along the first axis of ``S`` (``a`` of shape ``(B, D, n)``), for a weight
        matrix ``W = (Wm, Wr)`` of float balls: ``Wm c``, ``Wm g`` and the remainder
        ``|Wm| r + Wr (|c| + L + r)``."""
        Wm, Wr = W
        aW = np.abs(Wm)
        c = Wm @ a.c
        e_c = fo.matmul_err(aW, np.abs(a.c))
        G = e_G = None
        if a.G is not None:
            G = Wm @ a.G
            e_G = fo.matmul_err(aW, np.abs(a.G))
        r = fo.matmul_up(aW, a.r)
        if Wr is not None:
            size = fo.up(fo.up(np.abs(a.c) + self.lin(a.G, a.c.shape)) + a.r)
            r = fo.up(r + fo.matmul_up(Wr, size))
        return self.fold(c, G, r, e_c, e_G)

    def scale(self, k, a: FTM) -> FTM:
        """``k a`` for a scalar float ball ``k = (km, kr)``."""
        km, kr = k
        c = km * a.c
        G = None if a.G is None else km * a.G
        r = fo.up(abs(km) * a.r)
        if kr:
            size = fo.up(fo.up(np.abs(a.c) + self.lin(a.G, a.c.shape)) + a.r)
            r = fo.up(r + fo.up(kr * size))
        return self.fold(c, G, r, fo.err(c), None if G is None else fo.err(G))

    def exp(self, a: FTM) -> FTM:
        """``e^{c + u + e}`` (``|u| <= U``, ``|e| <= r``) as ``ec (1 + t) + ec u`` plus the remainder
        ``ec t' + er (1 + U + Rmax) + e^c_hi e^{U + r} r``: ``[ec - er, ec + er]`` encloses
        ``e^c``, ``e^u - 1 - u`` lies in ``[0, Rmax]`` with ``Rmax`` the smaller of
        ``e^U - 1 - U`` (rounded up) and ``U^2 / 2 e^U`` (no cancellation for small ``U``),
        centred at ``t = Rmax / 2`` (``t' >= Rmax - t``).  An interval (no gradient) is mapped
        through its ends, ``[e^{c-r}, e^{c+r}]``.

        Where ``up(c + up(U + r)) < LN_TINY`` the value is below :data:`TINY` on the whole box and
        the model is the constant ``TINY/2 +- TINY/2`` (:func:`_tiny_constant`), computed without
        a subnormal double (the exp bounds of those entries are taken at 0 and discarded)."""
        if a.G is None:
            lo, hi = fo.exp_lower(fo.down(a.c - a.r)), fo.exp_upper(fo.up(a.c + a.r))
            c = lo * 0.5 + hi * 0.5
            return FTM(c, None, fo.up(np.maximum(fo.up(hi - c), fo.up(c - lo)) + fo.err(c)))
        U = self.lin(a.G, a.c.shape)
        tiny = fo.up(a.c + fo.up(U + a.r)) < LN_TINY  # e^value < TINY on the whole box
        lo, hi = fo.exp_bounds(np.where(tiny, 0.0, a.c))  # no subnormal computed for those
        ec, er = hi, fo.up(hi - lo)
        eUr = fo.exp_upper(fo.up(U + a.r))  # >= e^U as well
        Rmax = np.minimum(fo.up(fo.up(fo.up(U * U) * 0.5) * eUr), fo.up(fo.up(eUr - 1.0) - U))
        t = Rmax * 0.5
        tp = np.maximum(t, fo.up(Rmax - t))
        one_t = 1.0 + t
        c = ec * one_t
        e_c = fo.up(fo.err(one_t) * ec + fo.err(c))  # ec (1 + t) with 1 + t and the product rounded
        G = a.G * _grad_axis(ec)
        e_G = fo.err(G)
        rem = fo.up(ec * tp)
        rem = fo.up(rem + fo.up(er * fo.up(fo.up(1.0 + U) + Rmax)))
        rem = fo.up(rem + fo.up(fo.up(hi * eUr) * a.r))
        out = self.fold(c, G, rem, e_c, e_G)
        if tiny.any():
            out = _tiny_constant(out, tiny)
        return out

    def reciprocal(self, b: FTM):
        """``(1/b, ok)``: ``1/c - g/c^2`` plus ``r/c^2 + (L + r)^2 / min|b|^3``; ``ok`` is False
        where the range of ``b`` contains 0 (that entry's model is then meaningless)."""
        lo, hi = self.range(b)
        ok = (lo > 0) | (hi < 0)
        min_abs = np.where(lo > 0, lo, np.where(hi < 0, -hi, 1.0))
        q = 1.0 / b.c  # |1/c - q| <= e_q
        e_q = fo.err(q)
        q2 = q * q  # |1/c^2 - q2| <= e_q (2|q| + e_q) + err(q2)
        e_q2 = fo.up(fo.up(e_q * fo.up(2 * np.abs(q) + e_q)) + fo.err(q2))
        G = e_G = None
        if b.G is not None:
            G = -b.G * _grad_axis(q2)
            e_G = fo.up(fo.up(np.abs(b.G) * _grad_axis(e_q2)) + fo.err(G))
        U = self.dev(b)
        m3 = fo.down(fo.down(min_abs * min_abs) * min_abs)
        rem = fo.up(fo.up(U * U) / np.where(ok, m3, 1.0))
        rem = fo.up(rem + fo.up(b.r * fo.up(q2 + e_q2)))
        return self.fold(q, G, rem, e_q, e_G), ok

    def relu(self, a: FTM) -> FTM:
        """``a`` where its range is ``>= 0``, 0 where ``<= 0``, else the constant hull ``[0, hi]``."""
        lo, hi = self.range(a)
        pos, neg = lo >= 0, hi <= 0
        mixed = ~(pos | neg)
        half = np.where(mixed, hi * 0.5, 0.0)
        hull_r = np.maximum(half, fo.up(hi - half))
        c = np.where(pos, a.c, half)
        r = np.where(pos, a.r, np.where(neg, 0.0, hull_r))
        G = None if a.G is None else np.where(_grad_axis(pos), a.G, 0.0)
        return FTM(c, G, r)


#: The threshold of the constant enclosure ``[0, TINY]`` and a double below ``ln TINY``
#: (:data:`symbounds.core.outward.TINY`, where the choice is justified).
TINY, LN_TINY = fo.TINY, fo.LN_TINY


def _tiny_constant(a: FTM, tiny) -> FTM:
    """``a`` with the entries ``tiny`` replaced by the constant model ``TINY/2 +- TINY/2``.

    Sound for a quantity ``v`` known to satisfy ``0 < v < TINY`` on the whole box at those
    entries (``v = e^{a(x)}`` with ``a(x) <= c + U + r <= up(c + up(U + r)) < LN_TINY < ln TINY``
    for every ``x`` of the box, ``U = lin(g)`` the bound of the linear term): then
    ``|v - TINY/2| < TINY/2``, i.e. ``v`` lies in ``c + <0, delta> + [-r, r]`` with
    ``c = r = TINY/2`` (exact doubles) and a zero gradient."""
    half = TINY * 0.5
    c = np.where(tiny, half, a.c)
    r = np.where(tiny, half, a.r)
    G = None if a.G is None else np.where(_grad_axis(tiny), 0.0, a.G)
    return FTM(c, G, r)


def _grad_axis(x):
    """``x`` of shape ``(B,) + S`` shaped to broadcast against a gradient ``(B, d) + S``."""
    return x[:, None]


# ------------------------------------------------------------------------------------------
# weights


def _is_rational(v) -> bool:
    """An exact rational weight (int, Fraction, fmpq, fmpz or SymPy Rational; not a bool)."""
    if isinstance(v, bool):
        return False
    return isinstance(v, (int, Fraction, flint.fmpq, flint.fmpz)) or (isinstance(v, sympy.Basic) and v.is_Rational)


def _ball_from_ends(lo: Fraction, hi: Fraction) -> tuple[float, float]:
    """``(m, r)``: the double nearest the midpoint of ``[lo, hi]`` and a radius (rounded up, the
    midpoint's rounding included) with ``[lo, hi]`` inside ``m +- r``."""
    m, e = fo.from_fraction((lo + hi) / 2)
    return m, float(fo.up(fo.up(float(fo.up(float((hi - lo) / 2)))) + e))


def _ball_of(v, ball: BallContext):
    """``(m, r)``: a double and a radius enclosing the exact weight ``v``."""
    if _is_rational(v):
        return fo.from_fraction(as_fraction(v))
    with ball.scope():
        x = v if isinstance(v, flint.arb) else ball.convert(v)
        if not x.is_finite():
            return 0.0, np.inf
        return _ball_from_ends(arb_to_fraction(x.lower()), arb_to_fraction(x.upper()))


def _matrix(M, conv):
    """A weight matrix as float balls ``(Wm, Wr)`` (``Wr`` None when every entry is a double)."""
    rows = [[conv(v) for v in row] for row in M]
    Wm = np.array([[m for m, _ in row] for row in rows], dtype=np.float64).reshape(len(M), -1)
    Wr = np.array([[r for _, r in row] for row in rows], dtype=np.float64).reshape(len(M), -1)
    return Wm, (Wr if Wr.any() else None)


class FloatBoxEvaluator:
    """One model's weights as float balls, its affine prefix as float intervals, and the box pass.

    Build it with :func:`evaluator`; :meth:`ranges` gives ``(lo, hi)`` enclosures of the readout
    over each box of a batch."""

    def __init__(self, model: Transformer, prec: int = 128):
        self.model = model
        ball = BallContext(prec)
        num = model.numeric(ball)
        self.d = len(model.embedding.E[0])
        self.column = model.embedding.column
        self.layers = []
        st = model.structure()
        const, silent = st.constant_heads, st.silent_heads
        # tokens whose values can be nonzero at the first layer (exact zeros of the embedding)
        vcols0 = st.first_value_columns
        # The weights of the numeric model in the ball context (named constants evaluated there),
        # but an exact rational weight is converted directly.
        for i, (layer, nlayer) in enumerate(zip(model.layers, num.layers)):
            conv = _converter(ball)
            if isinstance(layer, Attention):
                heads = []
                for h, (head, nh) in enumerate(zip(layer.heads, nlayer.heads)):
                    if (i, h) in silent:
                        continue
                    mats = [_matrix(_pick(getattr(head, w), getattr(nh, w)), conv) for w in ("W_Q", "W_K", "W_V", "W_O")]
                    heads.append(FloatHead(*mats, value_columns=vcols0.get(h) if i == 0 else None, index=h,
                                           const=bool(const.get((i, h)))))
                tau = None if layer.tau is None else _scalar(_pick(layer.tau, nlayer.tau), conv, True, ball)
                self.layers.append(FloatAttention(i, layer.kind, _scalar(_pick(layer.skip, nlayer.skip), conv), tau,
                                                  tuple(heads)))
            else:
                W1 = _matrix(_pick(layer.W1, nlayer.W1), conv)
                b1 = _vector(_pick(layer.b1, nlayer.b1), conv)
                W2 = _matrix(_pick(layer.W2, nlayer.W2), conv)
                b2 = _vector(_pick(layer.b2, nlayer.b2), conv)
                self.layers.append(FloatFeedForward(i, W1, b1, W2, b2, _scalar(_pick(layer.skip, nlayer.skip), conv),
                                                     st.relu_pairs[i]))
        conv = _converter(ball)
        self.base = _matrix(_pick(model.embedding.base, num.embedding.base), conv)
        self.E = _matrix(_pick(model.embedding.E, num.embedding.E), conv)
        self.readout = model.readout
        self.structure = st
        self.needed = st.needed_columns
        self.prefix = st.affine_prefix
        self.dep = st.prefix_dependence
        self._prefix_maps = None
        self._read = None
        #: the softmax-weighted values centred, as a ratio of sums and met with their convex hull
        #: (:func:`_weighted_values`; ``CertifyOptions.tight``, on by default: the checker kernel
        #: re-derives the same three, symbounds_kernel/hull.py); False: the plain product
        self.tight = True

    # --- the pass ---------------------------------------------------------------------------------
    def _embed(self, bx: _Boxes, x0) -> FTM:
        """``Z_0 = base + E x`` (``x`` added to column ``column``) over the boxes."""
        Bm, Br = self.base
        B, (D, n) = x0.shape[0], Bm.shape
        c = np.broadcast_to(Bm, (B, D, n)).copy()
        r = np.broadcast_to(Br if Br is not None else np.zeros((D, n)), (B, D, n)).copy()
        Em, Er = self.E
        col = c[:, :, self.column] + x0 @ Em.T
        e_col = fo.up(fo.matmul_err(np.abs(x0), np.abs(Em.T)) + fo.err(col))
        size = fo.up(np.abs(x0) + bx.h)
        if Er is not None:
            e_col = fo.up(e_col + fo.matmul_up(size, Er.T))
        c[:, :, self.column] = col
        r[:, :, self.column] = fo.up(r[:, :, self.column] + e_col)
        G = np.zeros((B, bx.d, D, n))
        G[:, :, :, self.column] = np.broadcast_to(Em.T, (B, bx.d, D))
        return FTM(c, G, r)

    def _run(self, bx: _Boxes, Z: FTM, start: int, stop: int, prune: bool, shared_scores: bool):
        """``(Z_stop, cols)``: the layers ``start..stop-1``, each layer's ``apply`` walked with
        :class:`FloatBoxOps`; with ``prune``, the first layer that only the readout's column needs
        keeps only ``cols`` (None if no layer pruned); with ``shared_scores``, an input-independent
        head's softmax is computed once, at the first box (the points of the affine prefix)."""
        ops = FloatBoxOps(bx, tight=self.tight)
        run = self._walk(shared_scores)
        kept = None
        last = max((k for k, layer in enumerate(self.layers) if isinstance(layer, FloatAttention)), default=-1)
        for i in range(start, stop):
            ops.hull = i == last
            cols = self.needed.get(i) if (prune and kept is None) else None
            ops.shared_rows = _shared_rows(self.layers[i], Z, shared_scores)
            Z = self.layers[i].apply(ops, Z, run, cols)
            kept = kept if cols is None else list(cols)
        return Z, kept

    def _walk(self, shared_scores: bool) -> Run:
        """A pass's :class:`~symbounds.core.layers.Run`: the input-independent heads may share one
        softmax only with ``shared_scores`` (after the prefix each box's state is its own)."""
        return Run(self.structure, {}, self.structure.constant_heads if shared_scores else {})

    def _attention(self, bx, layer, Z: FTM, cols, shared_scores) -> FTM:
        """One attention layer (``layer.apply`` over :class:`FloatBoxOps`); the interval softmax
        rows of a large prefix layer shared across its heads (:func:`float_shared.rows_for`)."""
        return layer.apply(FloatBoxOps(bx, _shared_rows(layer, Z, shared_scores), self.tight), Z, self._walk(shared_scores),
                           cols)

    def _ffn(self, bx, layer, Z: FTM, cols) -> FTM:
        """One feed-forward layer (``layer.apply`` over :class:`FloatBoxOps`)."""
        return layer.apply(FloatBoxOps(bx, tight=self.tight), Z, self._walk(False), cols)

    def setup(self):
        """The one-off work: the affine prefix (:meth:`_prefix`).  Raises ValueError when float64
        cannot enclose it."""
        if self.prefix > 0:
            self._prefix()

    def _prefix(self):
        """``(F_0, [F_i])`` as float intervals ``(c, r)``: the affine prefix at x = 0 and x = e_i."""
        if self._prefix_maps is None:
            d = self.d
            pts = np.vstack([np.zeros((1, d)), np.eye(d)])
            bx = _Boxes(np.zeros((d + 1, 0)))
            Z = self._embed_points(bx, pts)
            Z, _ = self._run(bx, Z, 0, self.prefix, prune=False, shared_scores=True)
            if bx.bad.any():
                raise ValueError("the affine prefix cannot be enclosed in float64")
            F0c, F0r = Z.c[0], Z.r[0]
            # F_i = Z(e_i) - Z(0), as intervals (one model per i along the batch axis)
            F = bx.add(FTM(Z.c[1:], None, Z.r[1:]), FTM(Z.c[:1], None, Z.r[:1]), -1.0)
            dep = np.array(self.dep, dtype=bool)
            # entries no input reaches do not change
            maps = (F0c, F0r, np.where(dep, F.c, 0.0), np.where(dep, F.r, 0.0))
            if not all(np.isfinite(a).all() for a in maps):
                raise ValueError("the affine prefix cannot be enclosed in float64")
            self._prefix_maps = maps
        return self._prefix_maps

    def _embed_points(self, bx, pts) -> FTM:
        Z = self._embed(_Boxes(np.zeros((pts.shape[0], pts.shape[1]))), pts)
        return FTM(Z.c, None, Z.r)

    def _from_prefix(self, bx: _Boxes, x0) -> FTM:
        """``F_0 + sum_i x_i F_i`` over the boxes: ``c = F_0 + sum x0_i F_i``, ``g_i = F_i``, and
        the remainder ``r_0 + sum_i r_i (|x0_i| + h_i)`` plus rounding."""
        F0c, F0r, Fc, Fr = self._prefix()
        rows = self._rows_read()
        B = x0.shape[0]
        d = self.d
        D, n = F0c.shape
        sub = (len(rows), n)
        X = np.hstack([np.ones((B, 1)), x0])  # (B, d+1)
        stack = np.vstack([F0c[rows].reshape(1, -1), Fc[:, rows].reshape(d, -1)])  # (d+1, rows n)
        c_sub = (X @ stack).reshape((B,) + sub)
        e_sub = fo.matmul_err(np.abs(X), np.abs(stack)).reshape((B,) + sub)
        size = np.hstack([np.ones((B, 1)), fo.up(np.abs(x0) + bx.h)])
        rstack = np.vstack([F0r[rows].reshape(1, -1), Fr[:, rows].reshape(d, -1)])
        r_sub = fo.up(fo.matmul_up(size, rstack).reshape((B,) + sub) + e_sub)
        # rows the next layer does not read stay exactly 0: they cannot change the output
        c, r, G = np.zeros((B, D, n)), np.zeros((B, D, n)), np.zeros((B, d, D, n))
        c[:, rows], r[:, rows] = c_sub, r_sub
        G[:, :, rows] = Fc[None, :, rows]
        return FTM(c, G, r)

    def _rows_read(self) -> list:
        """The rows of the state after the affine prefix that can reach the output: those the
        next layer reads (queries, keys, values or first-layer weights, and every row through a
        nonzero skip), or the readout's row when the prefix is the whole network."""
        if self._read is None:
            D = self.base[0].shape[0]
            if self.prefix >= len(self.layers):
                self._read = [self.readout.row]
            else:
                layer = self.layers[self.prefix]
                if isinstance(layer, FloatAttention):
                    mats = [m for hd in layer.heads for m in (hd.W_Q, hd.W_K, hd.W_V)]
                else:
                    mats = [layer.W1]
                skip = layer.skip
                used = np.zeros(D, dtype=bool)
                for Wm, Wr in mats:
                    used |= (Wm != 0).any(axis=0)
                    if Wr is not None:
                        used |= (Wr != 0).any(axis=0)
                if skip[0] or skip[1]:
                    used[:] = True
                self._read = [int(i) for i in np.flatnonzero(used)]
        return self._read

    def ranges(self, lo, hi):
        """``(lo, hi, ok)`` float enclosures of the readout ``T`` over the boxes ``[lo_b, hi_b]``
        (sequences of exact rationals); ``ok[b]`` is False where float64 could not enclose it (the
        caller then uses Arb)."""
        out = self.enclose(lo, hi)
        return out[0], out[1], out[2]

    def enclose(self, lo, hi):
        """``(lo, hi, ok, centre_lo, centre_hi, axis)``: :meth:`ranges`; an enclosure of ``T`` at
        the centre of each box read off the same model (``c +- r``, its value at ``delta = 0``):
        wider than a point evaluation by the remainder, and free; and the input ``i`` with the
        largest ``|g_i| h_i`` in ``T``'s model (where a split narrows the enclosure most; -1
        where there is none)."""
        B = len(lo)
        x0, h = _centres(lo, hi)
        res = [np.full(B, -np.inf), np.full(B, np.inf), np.zeros(B, dtype=bool),
               np.full(B, -np.inf), np.full(B, np.inf), np.full(B, -1, dtype=np.int64)]
        step = max(1, _BATCH_ENTRIES // self._entries_per_box())
        for s in range(0, B, step):
            sl = slice(s, s + step)
            with np.errstate(all="ignore"):
                a, b, bad, ca, cb, axis = self._batch(x0[sl], h[sl])
            fin = np.isfinite(a) & np.isfinite(b) & ~bad
            res[0][sl], res[1][sl], res[2][sl] = a, b, fin
            res[3][sl], res[4][sl] = np.where(fin, ca, -np.inf), np.where(fin, cb, np.inf)
            res[5][sl] = np.where(fin, axis, -1)
        return tuple(res)

    def walk(self, lo, hi):
        """``(lo, hi, ok)`` as :meth:`ranges`, but every layer walked over the boxes from the
        embedding (no affine prefix, no fused kernel): the plain pass the shortcuts rewrite."""
        x0, h = _centres(lo, hi)
        with np.errstate(all="ignore"):
            a, b, bad = self._batch(x0, h, shortcuts=False)[:3]
        return a, b, np.isfinite(a) & np.isfinite(b) & ~bad

    def _batch(self, x0, h, shortcuts: bool = True):
        bx = _Boxes(h)
        fused = None
        if shortcuts:
            t = self.tight  # the kernel follows the switches of _weighted_values
            flags = (CENTRE_VALUES and t, RATIO_VALUES and t, HULL_VALUES and t)
            fused = fused_boxes.readout_model(self, x0, h, self._prefix, self._rows_read, flags)  # compiled, where it applies
        if fused is not None:
            T = FTM(*fused[:3])
            bx.bad |= fused[3]
        else:
            start = self.prefix if shortcuts else 0
            with np.errstate(all="ignore"):
                Z = self._from_prefix(bx, x0) if start > 0 else self._embed(bx, x0)
            Z, kept = self._run(bx, Z, start, len(self.layers), prune=True, shared_scores=False)
            ro = self.readout
            j = ro.column if kept is None else kept.index(ro.column)
            T = Z[ro.row, j]
        lo, hi = bx.range(T)
        # the input whose linear term widens the output most, if it does so at least twice as much
        # as the widest side's (else the widest side; -1: no gradient)
        axis = np.full(len(lo), -1)
        if T.G is not None:
            w = np.abs(T.G) * h
            top, wide = np.argmax(w, axis=1), np.argmax(h, axis=1)
            rows = np.arange(len(lo))
            axis = np.where(w[rows, top] > 2 * w[rows, wide], top, wide)
        return lo, hi, bx.bad, fo.down(T.c - T.r), fo.up(T.c + T.r), axis

    def _entries_per_box(self) -> int:
        """The widest array a box creates after the prefix (for the batch size)."""
        n = len(self.model.embedding.base[0])
        D = len(self.model.embedding.base)
        worst = D * n
        for i in range(self.prefix, len(self.layers)):
            layer = self.layers[i]
            nq = len(self.needed[i]) if i in self.needed else n
            if isinstance(layer, FloatAttention):
                for hd in layer.heads:
                    worst = max(worst, max(hd.W_Q[0].shape[0], hd.W_V[0].shape[0]) * nq * n)
            else:
                worst = max(worst, layer.W1[0].shape[0] * nq)
        return worst * (self.d + 1)


def _softmax(bx: _Boxes, Q: FTM, K: FTM, tau, tight: bool = True, hull: bool = False):
    """``(pi, ok)``: ``pi[b, j, k] = softmax_k(<Q_j, K_k> / tau)`` (``Q`` of shape ``(B, dk, nq)``,
    ``K`` of ``(B, dk, n)``), shifted by the score with the largest upper end in each row."""
    Qe, Ke = Q[:, :, None], K[:, None, :]  # (B, dk, nq, 1) and (B, dk, 1, n)
    S = bx.sum(bx.mul(Qe, Ke), 0)  # (B, nq, n)
    if tau is not None:
        S = bx.scale(tau, S)
    A = bx.add(S, _shift(S), -1.0)
    E = bx.exp(A)
    total = bx.sum(E, 1)  # (B, nq)
    inv, ok = bx.reciprocal(total)
    inv = FTM(inv.c[:, :, None], None if inv.G is None else inv.G[:, :, :, None], inv.r[:, :, None])
    pi = bx.mul(E, inv)
    return _Softmax(pi, E, inv, _weight_bounds(bx, A) if (HULL_VALUES and tight and hull) else None), ok


def _weight_bounds(bx: _Boxes, A: FTM):
    """Upper bounds ``u_k >= pi_k`` over the box from the ranges ``[a_k^-, a_k^+]`` of the shifted
    scores: ``pi_k = e_k / (e_k + R_k)`` grows with ``e_k = e^{a_k}`` and falls with the others'
    sum ``R_k``, so ``pi_k <= e^{a_k^+} / (e^{a_k^+} + sum_{j != k} e^{a_j^-})`` (at most 1).
    An end below ``LN_TINY`` is bounded by ``e^{a^-} >= 0`` and ``e^{a^+} <= TINY`` (no subnormal
    double)."""
    lo, hi = bx.range(A)
    # ends below LN_TINY: e^lo >= 0 and e^hi <= TINY, computed without subnormals
    elo = np.where(lo < LN_TINY, 0.0, fo.exp_lower(np.maximum(lo, LN_TINY)))
    ehi = np.where(hi < LN_TINY, TINY, fo.exp_upper(np.maximum(hi, LN_TINY)))
    n = elo.shape[-1]
    tot = fo.sum_down(elo, 2)[:, :, None]
    rest = np.maximum(fo.down(tot - elo), 0.0)  # <= sum of the others' lower bounds
    den = fo.down(ehi + rest)
    u = np.where(den > 0, fo.up(ehi / np.where(den > 0, den, 1.0)), 1.0)
    u = np.minimum(u, 1.0)
    return np.where(np.isfinite(u), u, 1.0) if n else u


class _Softmax(FTM):
    """The model of ``pi = E / N`` with its factors ``E`` (``(B, nq, n)``) and ``1/N``
    (``(B, nq, 1)``) kept, for the weighted sum taken as a ratio of sums (:func:`_weighted_values`)."""

    __slots__ = ("E", "inv", "u")

    def __init__(self, pi: FTM, E: FTM, inv: FTM, u=None):
        super().__init__(pi.c, pi.G, pi.r)
        self.E, self.inv, self.u = E, inv, u


def _hull(u, vlo, vhi):
    """``(lo, hi)`` with ``lo <= sum_k pi_k v_k <= hi`` for every ``pi`` with ``0 <= pi_k <= u_k``,
    ``sum_k pi_k = 1`` and ``v_k`` in ``[vlo_k, vhi_k]`` (the last axis): for every ``t``,
    ``sum_k pi_k v_k - t = sum_k pi_k (v_k - t) <= sum_k u_k (v_k - t)_+``, so
    ``hi = t + sum_k u_k (vhi_k - t)_+``; ``t`` is taken where the weights ``u`` of the largest
    values first reach 1 (where the bound is least; any ``t`` is sound), and likewise for ``lo``."""

    def upper(u, v):
        order = np.argsort(-v, axis=-1, kind="stable")
        vs = np.take_along_axis(v, order, -1)
        cum = np.cumsum(np.take_along_axis(u, order, -1), axis=-1)
        k = np.minimum((cum < 1.0).sum(axis=-1, keepdims=True), v.shape[-1] - 1)
        t = np.take_along_axis(vs, k, -1)
        gap = np.maximum(fo.up(v - t), 0.0)
        return fo.up(t[..., 0] + fo.sum_up(fo.up(u * gap), -1))

    with np.errstate(all="ignore"):
        hi = upper(u, vhi)
        lo = -upper(u, -vlo)
    ok = np.isfinite(hi) & np.isfinite(lo)
    return np.where(ok, lo, -np.inf), np.where(ok, hi, np.inf)


def _softmax_interval(Q: FTM, K: FTM, tau, keep, block: int = 1 << 22):
    """``(pi[:, :, keep], ok)`` for interval scores (no gradients): ``pi`` in
    ``[E_lo / N_hi, E_hi / N_lo]`` with ``E = exp(s - m)`` enclosed from the ends of each score's
    interval and ``N`` the row's sum of ``E``.  The shift ``m`` (the row's largest centre) is any
    double: the softmax does not depend on it.  The terms below ``e^-745`` cost no polynomial
    (:func:`symbounds.core.outward.exp_upper`), so a large attention scale, where nearly every
    weight of a row underflows, is cheap.  Rows are taken in blocks of at most ``block`` scores."""
    Qt = FTM(np.swapaxes(Q.c, 1, 2), None, np.swapaxes(Q.r, 1, 2))  # (B, nq, dk)
    nq, n = Qt.c.shape[1], K.c.shape[2]
    step = max(1, block // max(1, n))
    los, his, oks = [], [], []
    for j0 in range(0, nq, step):
        qc, qr = Qt.c[:, j0:j0 + step], Qt.r[:, j0:j0 + step]
        Sc = qc @ K.c
        # |s - Sc| <= sum_a |qc_a| Kr_a + qr_a (|Kc_a| + Kr_a) + gamma |qc_a||Kc_a| + dk eta (the
        # rounding of Sc): one product of stacked factors, rounded up
        dk = qc.shape[-1]
        aq = np.abs(qc)
        left = np.concatenate([aq, qr, fo.up(aq * float(fo.up(2 * dk * fo.U)))], axis=-1)
        right = np.concatenate([K.r, fo.up(np.abs(K.c) + K.r), np.abs(K.c)], axis=-2)
        Sr = fo.up(fo.matmul_up(left, right) + dk * fo.ETA)
        if tau is not None:
            tm, tr = tau
            S2 = tm * Sc
            Sr = fo.up(fo.up(abs(tm) * Sr) + fo.err(S2))
            if tr:
                Sr = fo.up(Sr + fo.up(tr * fo.up(np.abs(Sc) + Sr)))
            Sc = S2
        a = Sc - Sc.max(axis=2, keepdims=True)
        ra = fo.up(Sr + fo.err(a))
        Elo, Ehi = fo.exp_lower(fo.down(a - ra)), fo.exp_upper(fo.up(a + ra))
        tot_lo = fo.sum_down(Elo, axis=2)[:, :, None]
        tot_hi = fo.sum_up(Ehi, axis=2)[:, :, None]
        oks.append((tot_lo > 0)[:, :, 0])
        los.append(np.maximum(fo.down(Elo[:, :, keep] / tot_hi), 0.0))
        his.append(fo.up(Ehi[:, :, keep] / np.where(tot_lo > 0, tot_lo, 1.0)))
    lo, hi = np.concatenate(los, axis=1), np.concatenate(his, axis=1)
    c = lo * 0.5 + hi * 0.5
    return FTM(c, None, np.maximum(fo.up(hi - c), fo.up(c - lo))), np.concatenate(oks, axis=1)


def _shift(S: FTM) -> FTM:
    """The shift of each softmax row: any function of ``x`` subtracted from every score of a row
    leaves its softmax unchanged, so the shift is an exact affine model chosen for tight
    enclosures: the row's largest centre, and the gradient ``sum_k w_k g_k`` averaged with the
    softmax weights ``w`` of the centres.  Then the scores that carry the weight have small
    gradient differences, whichever of them is largest on the box.  (Shifting by one score's
    model instead makes the enclosure depend on a near-tie of upper ends.)  A token whose centre
    is below the row's largest by more than ``-LN_TINY`` gets the weight 0 (any weights do)."""
    cm = S.c.max(axis=2, keepdims=True)
    if S.G is None:
        return FTM(cm, None, np.zeros_like(cm))
    with np.errstate(all="ignore"):
        X = S.c - cm
        w = np.where(X < LN_TINY, 0.0, np.exp(np.maximum(X, LN_TINY)))  # far tokens: weight 0, no subnormal
        w = w / w.sum(axis=2, keepdims=True)
    w = np.where(np.isfinite(w), w, 0.0)
    gm = (S.G * w[:, None]).sum(axis=3, keepdims=True)
    return FTM(cm, gm, np.zeros_like(cm))


#: Centre the values at their softmax-weighted mean before weighting them, and (with
#: RATIO_VALUES) take the weighted sum as a ratio of sums (see _weighted_values; the fused kernel
#: follows both switches).  BENCHMARKS.md, "Fewer boxes": 7,417 -> 735 boxes at d = 2, P = 256.
CENTRE_VALUES = True
RATIO_VALUES = True
#: Meet the weighted values with their convex hull, the weights bounded over the box (_hull).
HULL_VALUES = True


def _weighted_values(bx: _Boxes, pi: FTM, V: FTM, tight: bool = True) -> FTM:
    """``A[b, a, j] = sum_k pi[b, j, k] V[b, a, k]`` (``pi`` may have batch size 1).

    Over Taylor models the values are first centred: ``sum_k pi_k = 1`` exactly, so
    ``A = m + sum_k pi_k (V_k - m)`` for any ``m`` (a double per row and query, here the mean of
    the value centres weighted by the centres of ``pi``).  Each ``pi_k``'s remainder is then
    multiplied by ``|V_k - m|``, small on the tokens that carry the weight, instead of ``|V_k|``.
    With :data:`RATIO_VALUES` and ``pi = E / N`` known by its factors (:class:`_Softmax`), the sum
    is ``m + (sum_k E_k (V_k - m)) (1/N)``: one product with ``1/N`` after the sum, whose centre is
    near 0, instead of one per token."""
    if pi.G is None and V.G is None:
        return _interval_matmul(pi, V)
    P = FTM(pi.c[:, None], None if pi.G is None else pi.G[:, :, None], pi.r[:, None])  # (B, 1, nq, n)
    Vv = V[:, None, :]  # (B, dv, 1, n)
    if not (CENTRE_VALUES and tight and isinstance(pi, _Softmax)) or pi.G is None:  # a whole softmax row sums to 1
        A = bx.sum(bx.mul(P, Vv), 2)
        return _meet_hull(bx, A, pi.u, V) if isinstance(pi, _Softmax) and pi.u is not None else A
    with np.errstate(all="ignore"):
        m = (P.c * Vv.c).sum(axis=3)  # (B, dv, nq), any doubles (pi may have batch size 1)
    m = np.where(np.isfinite(m), m, 0.0)
    M = FTM(m[:, :, :, None], None, np.zeros_like(m)[:, :, :, None])
    Vc = bx.add(Vv, M, -1.0)  # (B, dv, nq, n)
    if RATIO_VALUES and tight and isinstance(pi, _Softmax) and pi.E.G is not None:
        E, inv = pi.E, pi.inv
        Ee = FTM(E.c[:, None], E.G[:, :, None], E.r[:, None])  # (B, 1, nq, n)
        num = bx.sum(bx.mul(Ee, Vc), 2)  # (B, dv, nq)
        iv = FTM(inv.c[:, None, :, 0], None if inv.G is None else inv.G[:, :, None, :, 0], inv.r[:, None, :, 0])
        A = bx.mul(num, iv)
    else:
        A = bx.sum(bx.mul(P, Vc), 2)
    A = bx.add(A, FTM(m, None, np.zeros_like(m)))
    if isinstance(pi, _Softmax) and pi.u is not None:
        A = _meet_hull(bx, A, pi.u, V)
    return A


def _meet_hull(bx: _Boxes, A: FTM, u, V: FTM) -> FTM:
    """``A`` where its model is the narrower, else the interval of :func:`_hull` (the weighted
    values' convex hull, the weights bounded by ``u``: wide boxes, where the first-order model of
    the softmax is poor).  Both enclose ``A``, so either is sound."""
    vlo, vhi = bx.range(V)  # (B, dv, n)
    u, vlo, vhi = np.broadcast_arrays(u[:, None], vlo[:, :, None], vhi[:, :, None])  # (B, dv, nq, n)
    lo, hi = _hull(u, vlo, vhi)  # (B, dv, nq)
    alo, ahi = bx.range(A)
    use = (hi - lo) < (ahi - alo)
    if not use.any():
        return A
    c = np.where(use, lo * 0.5 + hi * 0.5, A.c)
    r = np.where(use, np.maximum(fo.up(hi - c), fo.up(c - lo)), A.r)
    G = None if A.G is None else np.where(use[:, None], 0.0, A.G)
    return FTM(c, G, r)


def _interval_matmul(pi: FTM, V: FTM) -> FTM:
    """``V pi^T`` for intervals (no gradients): midpoints through BLAS, radii bounded a priori."""
    pc, pr = pi.c, pi.r  # (B', nq, n)
    vc, vr = V.c, V.r  # (B, dv, n)
    pcT, prT = np.swapaxes(pc, 1, 2), np.swapaxes(pr, 1, 2)  # (B', n, nq)
    c = vc @ pcT
    e = fo.matmul_err(np.abs(vc), np.abs(pcT))
    r = fo.up(fo.matmul_up(vr, np.abs(pcT)) + fo.matmul_up(fo.up(np.abs(vc) + vr), prT))
    return FTM(c, None, fo.up(r + e))


def _add_bias(bx: _Boxes, a: FTM, b) -> FTM:
    bm, br = b
    if not bm.any() and (br is None or not br.any()):
        return a
    r = np.zeros_like(bm) if br is None else br
    return bx.add(a, FTM(bm[None, :, None], None, r[None, :, None]))


class _ZeroState:
    """Exact zeros of shape ``(B, D, n)``, not yet made: a layer's output with skip weight 0 before
    its first head is added (that head's contribution is then the output, with no rounding)."""

    __slots__ = ("shape",)

    def __init__(self, shape):
        self.shape = shape

    def ftm(self) -> FTM:
        z = np.zeros(self.shape)
        return FTM(z, None, z.copy())


def _shared_rows(layer, Z: FTM, shared_scores: bool):
    """The :class:`~symbounds.core.float_shared.SharedRows` of an attention layer over the points
    of the affine prefix (``shared_scores``), when it has enough rows to pay; None otherwise."""
    if not shared_scores or not isinstance(layer, FloatAttention):
        return None
    return float_shared.rows_for(layer, Z, _softmax_interval)


class FloatBoxOps:
    """The layer operations of :mod:`symbounds.core.evaluator` over the batch of boxes ``bx``: the
    second evaluator the layers' ``apply`` (:mod:`symbounds.core.layers`) is walked with.

    States are :class:`FTM` arrays ``(B, D, n)`` (``G`` None for float intervals: the points of the
    affine prefix), weights float balls ``(Wm, Wr)`` (:mod:`symbounds.core.float_layers`), and the
    arithmetic is :class:`_Boxes`'s, every float operation rounded outward.  The box pass's own
    tightening steps are these operations:

    * ``attention_matrix``: over intervals, the interval softmax of :func:`_softmax_interval`
      (only the value-carrying ``columns`` kept); over Taylor models, :func:`_softmax`, shifted by
      an exact affine model (:func:`_shift`); a box whose softmax normaliser may be 0 is marked in
      ``bx.bad`` (the caller hands it to the Arb path);
    * ``one_input``: the first box's row, where an input-independent head's scores are computed
      once for the whole batch (the matrix, of batch size 1, broadcasts over the boxes);
    * ``output_columns``, ``columns``, ``scatter_columns``: a pruned layer keeps only the columns
      it evaluates (the others are never read), so later states have those columns only;
    * ``scale`` by an exact 0 is a lazy zero, which the first head's contribution replaces.
    """

    #: the first layer's shared softmax weights are an exact-arithmetic device, not used here
    shares_softmax = False

    def __init__(self, bx: _Boxes, shared_rows=None, tight: bool = True):
        self.bx = bx
        #: the softmax-weighted values centred, as a ratio of sums and met with their hull
        #: (:func:`_weighted_values`, as the module's switches allow); False: the plain product
        self.tight = tight
        #: the hull too (only in the last attention layer: its interval, without a gradient, would
        #: widen a later softmax's first-order exp, whose remainder grows like ``e^r r``)
        self.hull = False
        #: a :class:`~symbounds.core.float_shared.SharedRows` serving the interval softmax, or None
        self.shared_rows = shared_rows

    # --- entrywise and linear ---------------------------------------------------------------------
    def linear(self, W, Z) -> FTM:
        return self.bx.linear(W, Z)

    def add_bias(self, H, b) -> FTM:
        return _add_bias(self.bx, H, b)

    def add(self, A, B) -> FTM:
        return self.bx.add(A, B)

    def is_zero(self, k) -> bool:
        """Whether the float ball ``k = (km, kr)`` is exactly 0."""
        return not (k[0] or k[1])

    def scale(self, k, Z):
        """``k Z``; a lazy zero for ``k`` exactly 0."""
        if self.is_zero(k):
            return _ZeroState(Z.c.shape)
        return self.bx.scale(k, Z)

    def relu(self, H) -> FTM:
        return self.bx.relu(H)

    def relu_pairs(self, H: FTM, pairs) -> FTM:
        """``relu(H)`` with each linear pair ``(u, u')`` as ``(H[u], 0)``
        (:meth:`~symbounds.core.evaluator.ScalarEvaluator.relu_pairs`)."""
        S = self.bx.relu(H)
        if pairs:
            idx = [u for u, _ in pairs]
            idx2 = [u2 for _, u2 in pairs]
            S.c[:, idx], S.r[:, idx] = H.c[:, idx], H.r[:, idx]
            S.c[:, idx2], S.r[:, idx2] = 0.0, 0.0
            if S.G is not None:
                S.G[:, :, idx] = H.G[:, :, idx]
                S.G[:, :, idx2] = 0.0
        return S

    def add_rows(self, out, contrib: FTM) -> FTM:
        """``out + contrib`` (``contrib`` itself on a lazy zero)."""
        return contrib if isinstance(out, _ZeroState) else self.bx.add(out, contrib)

    def finish(self, out) -> FTM:
        return out.ftm() if isinstance(out, _ZeroState) else out

    # --- columns and batch rows --------------------------------------------------------------------
    def width(self, Z) -> int:
        return Z.c.shape[2]

    def one_input(self, Z: FTM) -> FTM:
        """The first box's state (batch size 1)."""
        return FTM(Z.c[:1], None if Z.G is None else Z.G[:1], Z.r[:1])

    def output_columns(self, out, cols):
        """Only the columns ``cols`` of ``out`` (all for None)."""
        if cols is None:
            return out
        if isinstance(out, _ZeroState):
            return _ZeroState(out.shape[:2] + (len(cols),))
        return out[:, list(cols)]

    def columns(self, Z: FTM, cols) -> FTM:
        return Z[:, list(cols)]

    def scatter_columns(self, sub: FTM, cols, n: int) -> FTM:
        """``sub`` itself: the state keeps only the columns ``cols`` (the others are not read)."""
        return sub

    # --- attention ----------------------------------------------------------------------------------
    def _boxes_of(self, Z: FTM) -> _Boxes:
        """The boxes of ``Z``'s batch: ``bx``, or its first box for :meth:`one_input`'s state."""
        B = Z.c.shape[0]
        return self.bx if B == self.bx.h.shape[0] else _Boxes(self.bx.h[:B])

    def attention_matrix(self, kind, tau, WQ, WK, Z: FTM, rows=None, columns=None) -> FTM:
        """``pi[b, j, k]`` for the query columns ``rows`` (all for None); over intervals only the
        columns ``columns`` (all for None); ``tau`` is the ball of ``1/tau``.  Boxes whose
        normaliser may be 0 are marked in ``bx.bad``."""
        sbx = self._boxes_of(Z)
        Q = sbx.linear(WQ, Z)
        K = sbx.linear(WK, Z)
        if rows is not None:
            Q = Q[:, list(rows)]
        if Z.G is None:
            keep = list(range(K.c.shape[2])) if columns is None else columns
            softmax = _softmax_interval if self.shared_rows is None else self.shared_rows.softmax
            pi, ok = softmax(Q, K, tau, keep)
        else:
            pi, ok = _softmax(sbx, Q, K, tau, self.tight, self.hull)
        self.bx.bad |= ~ok.all(axis=1)
        return pi

    def head_output(self, pi: FTM, WV, WO, Z: FTM, columns=None) -> FTM:
        """``W_O A`` with ``A[b, a, j] = sum_k pi[b, j, k] (W_V Z)[b, a, k]`` (over intervals the
        columns ``columns`` of ``pi``, as :meth:`attention_matrix` kept them)."""
        bx = self.bx
        V = bx.linear(WV, Z)
        if Z.G is None:
            keep = list(range(V.c.shape[2])) if columns is None else columns
            A = _interval_matmul(pi, FTM(V.c[:, :, keep], None, V.r[:, :, keep]))
        else:
            A = _weighted_values(bx, pi, V, self.tight)
        return bx.linear(WO, A)


def _centres(lo, hi):
    """Centres (rounded) and half-widths (rounded up) of boxes given by exact ends; the centre's
    rounding error is added to the half-width, so the float box contains the exact one.

    Box ends are mostly dyadic rationals (a search halves boxes), so the work is done in float64
    where that is exact: ends ``n / 2^k`` with ``|n| < 2^53`` and ``2^k <= 2^960`` are doubles in
    the normal range, and where the sum ``lo + hi`` and the difference ``hi - lo`` are exact in
    float64 (their error terms by Knuth's TwoSum are 0) the centre ``(lo + hi) / 2`` and the
    half-width ``(hi - lo) / 2`` are exact doubles (halving a normal double is exact), the values
    :func:`_ball_from_ends` gives from Fractions.  Every other entry goes through
    :func:`_ball_from_ends`.

    The ends may also be given as float64 arrays of shape ``(B, d)``: each entry is then the
    exact rational it is (a finite double; a search's dyadic boxes hand theirs over this way,
    :meth:`symbounds.core.search.Box.doubles`, with no Fraction per end), and the same rule
    applies; a sum or difference below ``2^-1021`` in magnitude (other than 0), whose half could
    round, goes through :func:`_ball_from_ends` too."""
    if isinstance(lo, np.ndarray) and isinstance(hi, np.ndarray) and lo.dtype == hi.dtype == np.float64:
        flo, fhi = lo.reshape(len(lo), -1), hi.reshape(len(hi), -1)
        if not (np.isfinite(flo).all() and np.isfinite(fhi).all()):
            raise ValueError("a box end given as a double must be finite")
    else:
        B, d = len(lo), len(lo[0])
        flo = np.array([_dyadic_double(v) for row in lo for v in row], dtype=np.float64).reshape(B, d)
        fhi = np.array([_dyadic_double(v) for row in hi for v in row], dtype=np.float64).reshape(B, d)
    with np.errstate(all="ignore"):
        s, es = _two_sum(flo, fhi)
        w, ew = _two_sum(fhi, -flo)
        x0, r = s * 0.5, w * 0.5
        h = fo.up(fo.up(fo.up(r)))  # as _ball_from_ends rounds an exact half-width
    exact = (np.isfinite(flo) & np.isfinite(fhi) & (es == 0) & (ew == 0)
             & ((s == 0) | (np.abs(s) >= _HALVES)) & ((w == 0) | (np.abs(w) >= _HALVES)))
    for b, i in zip(*np.nonzero(~exact)):
        x0[b, i], h[b, i] = _ball_from_ends(Fraction(lo[b][i]), Fraction(hi[b][i]))
    return x0, h


#: Doubles at least this large in magnitude halve exactly (twice the least normal double).
_HALVES = 2.0**-1021


def _dyadic_double(v) -> float:
    """``v`` as a double when it is an ``int`` or ``Fraction`` ``n / 2^k`` with ``|n| < 2^53`` and
    ``2^k <= 2^960`` (then it is exactly that double, in the normal range), else NaN."""
    if isinstance(v, (int, Fraction)) and not isinstance(v, bool):
        num, den = v.numerator, v.denominator
        if den & (den - 1) == 0 and -(2**53) < num < 2**53 and den <= 2**960:
            return num / den
    return math.nan


def _two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``a + b = s + e`` exactly (Knuth; no overflow here:
    the operands are below 2^53)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _converter(ball):
    return lambda v: _ball_of(v, ball)


def _pick(exact, numeric):
    """The exact weights where they are rationals (converted directly), else the numeric ones."""
    if _all_rational(exact):
        return exact
    return numeric


def _all_rational(M) -> bool:
    if isinstance(M, (tuple, list)):
        return all(_all_rational(v) for v in M)
    return _is_rational(M)


def _scalar(v, conv, invert=False, ball=None):
    """A scalar weight (or its reciprocal) as a float ball."""
    if not invert:
        return conv(v)
    if _is_rational(v):
        return conv(1 / as_fraction(v))
    with ball.scope():
        return conv(1 / v)


def _vector(v, conv):
    Wm, Wr = _matrix([list(v)], conv)
    return Wm[0], (None if Wr is None else Wr[0])


def evaluator(model: Transformer, prec: int = 128):
    """A :class:`FloatBoxEvaluator` for ``model``, or None when the float path does not apply
    (token input, no readout, hardmax attention)."""
    if model.input != "vector" or model.readout is None or model.embedding is None:
        return None
    if any(isinstance(layer, Attention) and layer.kind != "softmax" for layer in model.layers):
        return None
    return FloatBoxEvaluator(model, prec)


# ------------------------------------------------------------------------------------------
# the steps of the pass, for evaluators built on it (symbounds.core.linear_bounds)

#: The Taylor-model arithmetic over a batch of boxes (half-widths ``h``).
Boxes = _Boxes
add_bias = _add_bias
centres = _centres


def embed(ev: FloatBoxEvaluator, bx: _Boxes, x0) -> FTM:
    """``Z_0 = base + E x`` over the boxes ``x0 +- bx.h``."""
    return ev._embed(bx, x0)


def attention_layer(ev: FloatBoxEvaluator, bx: _Boxes, layer, Z: FTM) -> FTM:
    """One attention layer (an entry of ``ev.layers``) on every token, scores per box."""
    return ev._attention(bx, layer, Z, None, False)


def ffn_layer(ev: FloatBoxEvaluator, bx: _Boxes, layer, Z: FTM) -> FTM:
    """One feed-forward layer (an entry of ``ev.layers``) on every token."""
    return ev._ffn(bx, layer, Z, None)
