"""Linear bounds of a network's output over boxes by backward propagation (CROWN family), rounded outward.

Over a box ``x = x0 + delta``, ``|delta_i| <= h_i``, every bound here has the form

    T(x) >= <a, delta> + c        (a lower bound; an upper bound is the lower bound of -T),

obtained as in CROWN (Zhang et al., NeurIPS 2018): start from the objective ``<Lambda, Z_L>`` and
substitute each layer backwards, replacing each nonlinearity by a linear function below (or above,
by the sign of its coefficient) valid on the pre-activation's range:

* **affine maps** ``V = W U + b`` (feed-forward weights, the residual ``skip``, the embedding
  ``Z_0 = base + E x``) substitute exactly: ``<Lambda, V> = <W^T Lambda, U> + <Lambda, b>``;
* **ReLU** ``S = relu(H)`` with ``H`` in ``[l, u]``: exact where ``l >= 0`` (``S = H``) or
  ``u <= 0`` (``S = 0``); where ``l < 0 < u``, ``S >= alpha H`` for a coefficient ``mu >= 0``, and
  the chord ``S <= s H + t`` for ``mu < 0``; ``alpha`` is 1 if ``u >= -l`` else 0 (CROWN's
  adaptive lower slope), and two more passes take ``alpha = 0`` and ``alpha = 1`` for every
  unstable ReLU, each bound keeping the best of the three (every choice is valid); the pairs ``relu(y) - relu(-y) = y`` found from the exact
  weights are substituted as ``y`` (as in the float pass);
* **attention** layers, two ways, each bound keeping the better: the heads relaxed through the
  softmax (:mod:`symbounds.core.linear_attention`: McCormick planes for the products, tangent and
  chord for ``exp`` and the reciprocal, node ranges from the float pass's Taylor models), or the
  heads' output ``A(x)`` entering as its first-order Taylor model from the float pass
  (:mod:`symbounds.core.float_boxes`), ``A(x) in c + <G, delta> + [-r, r]``, a pair of linear
  bounds in ``delta``: ``<Lambda, A> >= <Lambda, c> + <G^T Lambda, delta> - <|Lambda|, r>``.  The
  skip part ``rho Z`` of the layer is substituted exactly.  The Taylor model of the attention's
  *input* is the narrower, entry by entry, of the float pass's and the one read off this
  module's linear bounds of that input (midpoint line and the largest gap over the box).

The pre-activation ranges ``[l, u]`` of every ReLU come from the same backward propagation (one
objective per hidden unit and token, both signs) met with the float pass's Taylor ranges; the
final enclosure is met with the float pass's own.  So it is never wider than the Taylor-model
enclosure computed alongside, and on wide boxes with unstable ReLUs it is usually narrower (the
Taylor model replaces such a ReLU by the constant hull ``[0, u]``).

Rounding.  Coefficients are doubles, and every exact coefficient differs from the computed one
by at most ``E`` (:func:`symbounds.core.outward.matmul_err` for products and sums,
:func:`symbounds.core.outward.err` for one operation, plus ``|Lambda| W_r`` for a weight ball
``W_m +- W_r``).  An error ``E`` on the coefficient of a quantity ``V`` with ``|V| <= vmax`` on the
box (from the float pass's ranges or the bounds already computed) is moved into the constant:
``<Lambda_exact, V> >= <Lambda, V> - <E, vmax>``.  Constants are accumulated with
:func:`symbounds.core.outward.down` after every operation, and the chord ``S <= s H + t`` is
made valid for the *computed* slope ``s`` by taking ``t = max(-s l, u - s u)`` rounded up (a line
above a convex function at both ends of an interval is above it on the interval).  A bound that is
not finite makes the box fail (``ok`` False), never pass.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import outward as fo
from .float_boxes import FTM, Boxes, FloatBoxEvaluator, add_bias, attention_layer, centres, embed, ffn_layer
from .float_boxes import evaluator as _float_evaluator
from .float_layers import FloatFeedForward
from .linear_attention import absorb as _absorb
from .linear_attention import head_records, heads_backward
from .linear_attention import lower_dot as _lin_lower

__all__ = ["LinearBoundEvaluator", "SMALL_WORK", "linear_evaluator"]

#: Largest number of array entries of one batch's widest backward coefficient array (one
#: objective per hidden unit and token, per box).
_BATCH_ENTRIES = 1 << 21
#: The lower slopes of the unstable ReLUs tried, each objective keeping its best bound: CROWN's
#: adaptive choice (1 where ``u >= -l``), all 0, all 1.
_MODES = ("adaptive", "zero", "one")
#: The most work (objectives times entries per objective, per box) of a network ``small`` admits.
SMALL_WORK = 1 << 16


def _down_add(c, q):
    """A lower bound of ``c + q`` (both lower bounds)."""
    return fo.down(c + q)


class _Ffn:
    __slots__ = ("W1", "b1", "W2", "b2", "skip", "pairs", "l", "u", "hmax", "smax")


class _Att:
    __slots__ = ("att", "heads", "skip")


class LinearBoundEvaluator:
    """Linear-relaxation enclosures of a model's readout over batches of boxes (module docstring).

    Built on a :class:`symbounds.core.float_boxes.FloatBoxEvaluator` (its weights as float balls and
    its Taylor-model operations)."""

    def __init__(self, fast: FloatBoxEvaluator):
        self.fast = fast
        self.d = fast.d
        self.readout = fast.readout

    def ranges(self, lo, hi):
        """``(lo, hi, ok)``: float enclosures of the readout ``T`` over the boxes ``[lo_b, hi_b]``
        (sequences of exact rationals); ``ok[b]`` False where none could be computed."""
        B = len(lo)
        x0, h = centres(lo, hi)
        out_lo, out_hi = np.full(B, -np.inf), np.full(B, np.inf)
        ok = np.zeros(B, dtype=bool)
        step = max(1, _BATCH_ENTRIES // self._entries_per_box())
        for s in range(0, B, step):
            sl = slice(s, s + step)
            with np.errstate(all="ignore"):
                a, b, good = self._batch(x0[sl], h[sl])
            good = good & np.isfinite(a) & np.isfinite(b) & (a <= b)
            out_lo[sl], out_hi[sl], ok[sl] = np.where(good, a, -np.inf), np.where(good, b, np.inf), good
        return out_lo, out_hi, ok

    def small(self) -> bool:
        """Whether the network is small enough for the linear bounds to cost about as much as a few
        float passes (what ``linear="auto"`` of :class:`symbounds.core.search.BoxEvaluator` asks):
        the most objectives of one backward pass times the entries its layers touch per
        objective at most :data:`SMALL_WORK`."""
        return self._objectives() * sum(self._layer_sizes()) <= SMALL_WORK

    def _objectives(self) -> int:
        """The most objectives (both signs) of one backward pass, per box."""
        D, n = self.fast.base[0].shape
        worst = 2 * D * n
        for layer in self.fast.layers:
            if isinstance(layer, FloatFeedForward):
                worst = max(worst, 2 * layer.W1[0].shape[0] * n)
            else:
                for head in layer.heads:
                    worst = max(worst, 2 * max(m[0].shape[0] for m in (head.W_Q, head.W_K, head.W_V)) * n)
        return worst

    def _layer_sizes(self) -> list:
        """Per layer, the entries of its backward coefficient arrays for one objective."""
        D, n = self.fast.base[0].shape
        out = []
        for layer in self.fast.layers:
            if isinstance(layer, FloatFeedForward):
                Hd = layer.W1[0].shape[0]
                out.append(max(D, Hd) * n)
            else:
                out.append(sum(max(m[0].shape[0] for m in (hd.W_Q, hd.W_K, hd.W_V, hd.W_O)) * n * n
                               for hd in layer.heads) + D * n)
        return out

    def _entries_per_box(self) -> int:
        return self._objectives() * max(self._layer_sizes())

    # --- the forward sweep: ranges, relaxations and the attention's Taylor models --------------------
    def _batch(self, x0, h):
        ev = self.fast
        bx = Boxes(h)
        self._x0, self._h, self._bx = x0, h, bx
        self._recs: list = []
        self._zmax: list = []
        Z = embed(ev, bx, x0)
        layers = ev.layers
        for i, layer in enumerate(layers):
            self._zmax.append(_abs_max(bx, Z))
            if isinstance(layer, FloatFeedForward):
                Z = self._ffn(layer, Z, i)
            else:
                if i > 0 and isinstance(layers[i - 1], FloatFeedForward):
                    Z = self._sharpen(Z, i)
                    self._zmax[i] = _abs_max(bx, Z)
                heads, skip, tau = layer.heads, layer.skip, layer.tau
                att = attention_layer(ev, bx, replace(layer, skip=(0.0, 0.0)), Z)
                rec = _Att()
                rec.skip, rec.att = skip, att
                ranges = [[self._affine_ranges(Wb, None, i) for Wb in (hd.W_Q, hd.W_K, hd.W_V)] for hd in heads]
                rec.heads = head_records(bx, heads, tau, Z, ranges)
                self._recs.append(rec)
                Z = att if not (skip[0] or skip[1]) else bx.add(att, bx.scale(skip, Z))
        self._zmax.append(_abs_max(bx, Z))
        L = len(layers)
        ro = self.readout
        D, n = Z.c.shape[1:]
        B = len(x0)
        lam = np.zeros((B, 2, D, n))
        lam[:, 0, ro.row, ro.column] = 1.0
        lam[:, 1, ro.row, ro.column] = -1.0
        lower = self._best(lam, np.zeros((B, 2)), L)
        t_lo, t_hi = bx.range(Z[ro.row, ro.column])
        lo = np.maximum(lower[:, 0], t_lo)
        hi = np.minimum(-lower[:, 1], t_hi)
        return lo, hi, ~bx.bad

    def _affine_ranges(self, W, b, i: int):
        """``(lo, hi)`` of ``W Z_t + b`` (shape ``(B, rows, n)``) for ``Z = Z_i`` by the backward
        bounds, one objective per row and token, both signs; ``b`` None for no bias."""
        Wm, Wr = W
        Hd, D = Wm.shape
        B, _, n = self._zmax[i].shape
        if b is None:
            bm, br = np.zeros(Hd), None
        else:
            bm, br = b
        brr = np.repeat(br if br is not None else np.zeros(Hd), n)
        base = np.einsum("jd,tu->jtdu", Wm, np.eye(n)).reshape(Hd * n, D, n)
        lam = np.broadcast_to(np.concatenate([base, -base])[None], (B, 2 * Hd * n, D, n)).copy()
        c = np.concatenate([fo.down(-brr + np.repeat(bm, n)), fo.down(-brr - np.repeat(bm, n))])
        c = np.broadcast_to(c[None], (B, 2 * Hd * n)).copy()
        if Wr is not None:  # the radius of W times |Z|
            rad = np.einsum("jd,bdt->bjt", Wr, self._zmax[i]).reshape(B, Hd * n)
            # the einsum's own rounding: D products and a sum of D terms >= 0, underflow included
            rad = fo.up(fo.up(rad * float(fo.up(1.0 + 4 * D * fo.U))) + 2 * D * fo.ETA)
            c = fo.down(c - np.concatenate([rad, rad], axis=1))
        lower = self._best(lam, c, i)
        K = Hd * n
        return lower[:, :K].reshape(B, Hd, n), (-lower[:, K:]).reshape(B, Hd, n)

    def _ffn(self, layer, Z: FTM, i: int) -> FTM:
        """The records of an FFN layer (its pre-activation ranges from the backward bounds met
        with the Taylor ranges) and the layer's Taylor model."""
        ev, bx = self.fast, self._bx
        W1, b1, W2, b2, skip, pairs = layer.W1, layer.b1, layer.W2, layer.b2, layer.skip, layer.pairs
        H = add_bias(bx, bx.linear(W1, Z), b1)
        tl, tu = bx.range(H)
        cl, cu = self._affine_ranges(W1, b1, i)
        rec = _Ffn()
        rec.W1, rec.b1, rec.W2, rec.b2, rec.skip, rec.pairs = W1, b1, W2, b2, skip, pairs
        rec.l = np.maximum(np.where(np.isnan(cl), -np.inf, cl), tl)
        rec.u = np.minimum(np.where(np.isnan(cu), np.inf, cu), tu)
        rec.hmax = np.maximum(np.abs(rec.l), np.abs(rec.u))
        smax = np.maximum(rec.u, 0.0)
        for u_, u2 in pairs:
            smax[:, u_] = rec.hmax[:, u_]
            smax[:, u2] = 0.0
        rec.smax = smax
        self._recs.append(rec)
        return ffn_layer(ev, bx, layer, Z)

    def _sharpen(self, Z: FTM, i: int) -> FTM:
        """The Taylor model of ``Z_i`` entry by entry the narrower of ``Z`` and the one made of
        the backward linear bounds of ``Z_i``: for ``<aL, delta> + cL <= z <= <aU, delta> + cU``,
        centre ``(cL + cU)/2``, gradient ``(aL + aU)/2`` and remainder the larger gap over the box."""
        bx, h = self._bx, self._h
        B, D, n = Z.c.shape
        K = D * n
        eye = np.eye(K).reshape(K, D, n)
        lam = np.broadcast_to(np.concatenate([eye, -eye])[None], (B, 2 * K, D, n)).copy()
        a, c = self._backward(lam, np.zeros((B, 2 * K)), i)
        aL, cL = a[:, :K], c[:, :K]
        aU, cU = -a[:, K:], -c[:, K:]
        g = aL * 0.5 + aU * 0.5
        c0 = cL * 0.5 + cU * 0.5
        hh = h[:, None, :]
        gapU = fo.up(fo.sum_up(fo.up(fo.up(np.abs(aU - g)) * hh), axis=2) + fo.up(cU - c0))
        gapL = fo.up(fo.sum_up(fo.up(fo.up(np.abs(g - aL)) * hh), axis=2) + fo.up(c0 - cL))
        r = np.maximum(np.maximum(gapU, gapL), 0.0)
        lin = FTM(c0.reshape(B, D, n), np.swapaxes(g, 1, 2).reshape(B, self.d, D, n), r.reshape(B, D, n))
        w_lin, w_tay = bx.dev(lin), bx.dev(Z)
        pick = np.isfinite(w_lin) & ~(w_lin >= w_tay)
        G = np.where(pick[:, None], lin.G, Z.G)
        return FTM(np.where(pick, lin.c, Z.c), G, np.where(pick, lin.r, Z.r))

    # --- the backward substitution ------------------------------------------------------------------
    def _best(self, lam, c, upto: int):
        """The concretized lower bounds of :meth:`_backward`, the largest of its three lower-slope
        choices for each objective (each one is a valid bound)."""
        out = None
        atts = [False, True] if any(isinstance(r, _Att) for r in self._recs[:upto]) else [False]
        for relu in _MODES:
            for relax in atts:
                v = self._concretize(*self._backward(lam, c, upto, (relu, relax)))
                out = v if out is None else np.maximum(out, v)
        return out

    def _backward(self, lam, c, upto: int, mode=("adaptive", False)):
        """``(a, c)`` with ``<Lambda, Z_upto> + c0 >= <a, delta> + c`` on every box, for ``lam`` of
        shape ``(B, K, D, n)`` and the constants ``c0`` (``c``, shape ``(B, K)``); ``mode``: the
        lower slope of every unstable ReLU (:data:`_MODES`), and whether attention heads are
        relaxed (:mod:`symbounds.core.linear_attention`) or enter as their Taylor models."""
        relu, relax = mode
        ev, h = self.fast, self._h
        B, K = c.shape
        d = self.d
        a = np.zeros((B, K, d))
        hb = h[:, None, :]
        for i in reversed(range(upto)):
            rec = self._recs[i]
            zmax = self._zmax[i][:, None]
            if isinstance(rec, _Att) and relax:
                coef, c = heads_backward(rec.heads, lam, c, zmax)
                ref = [c]
                lam = self._skip(lam, rec.skip, zmax, ref, extra=coef)
                c = ref[0]
            elif isinstance(rec, _Att):
                att = rec.att
                Lf = lam.reshape(B, K, -1)
                c = _down_add(c, _lin_lower(Lf, att.c.reshape(B, -1)))
                c = fo.down(c - fo.matmul_up(np.abs(Lf), att.r.reshape(B, -1, 1))[..., 0])
                if att.G is not None:
                    Gf = np.swapaxes(att.G.reshape(B, d, -1), 1, 2)  # (B, Dn, d)
                    ga = Lf @ Gf
                    c = _absorb(c, fo.matmul_err(np.abs(Lf), np.abs(Gf)), hb)
                    a = a + ga
                    c = _absorb(c, fo.err(a), hb)
                ref = [c]
                lam = self._skip(lam, rec.skip, zmax, ref)
                c = ref[0]
            else:
                lam, c = self._ffn_back(rec, lam, c, zmax, relu)
        # the embedding: Z_0 = base + E x in column `column`, x = x0 + delta
        Bm, Br = ev.base
        Lf = lam.reshape(B, K, -1)
        c = _down_add(c, _lin_lower(Lf, Bm.reshape(-1), None if Br is None else Br.reshape(-1)))
        Em, Er = ev.E
        Lc = lam[:, :, :, ev.column]  # (B, K, D)
        ax = Lc @ Em  # (B, K, d)
        xmax = fo.up(np.abs(self._x0) + h)[:, None, :]
        c = _absorb(c, fo.matmul_err(np.abs(Lc), np.abs(Em)), xmax)
        if Er is not None:
            c = _absorb(c, fo.matmul_up(np.abs(Lc), Er), xmax)
        c = _down_add(c, _lin_lower(ax, self._x0))
        a2 = a + ax
        c = _absorb(c, fo.err(a2), hb)
        return a2, c

    def _skip(self, lam, skip, zmax, c_ref, extra=None):
        """``skip Lambda`` (plus ``extra``, a coefficient on the same quantity), the rounding
        errors moved into the constant ``c_ref[0]``."""
        km, kr = skip
        c = c_ref[0]
        if not (km or kr):
            out = extra if extra is not None else np.zeros_like(lam)
        else:
            p = km * lam
            c = _absorb(c, fo.err(p), zmax)
            if kr:
                c = _absorb(c, fo.up(np.abs(lam) * kr), zmax)
            if extra is not None:
                out = p + extra
                c = _absorb(c, fo.err(out), zmax)
            else:
                out = p
        c_ref[0] = c
        return out

    def _ffn_back(self, rec: _Ffn, lam, c, zmax, mode: str = "adaptive"):
        """``<Lambda, eta Z + W2 relu(W1 Z + b1) + b2>`` bounded below by ``<Lambda', Z> + c'``."""
        B, K = c.shape
        W1m, W1r = rec.W1
        b1m, b1r = rec.b1
        W2m, W2r = rec.W2
        b2m, b2r = rec.b2
        n = lam.shape[3]
        Lf = lam.reshape(B, K, -1)
        c = _down_add(c, _lin_lower(Lf, np.repeat(b2m, n), None if b2r is None else np.repeat(b2r, n)))
        mu = np.matmul(W2m.T, lam)  # (B, K, Hd, n)
        smax = rec.smax[:, None]
        c = _absorb(c, fo.matmul_err(np.abs(W2m.T), np.abs(lam)), smax)
        if W2r is not None:
            c = _absorb(c, fo.matmul_up(W2r.T, np.abs(lam)), smax)
        # ReLU: slope and intercept by the sign of mu
        l, u = rec.l[:, None], rec.u[:, None]
        act, dead = l >= 0, u <= 0
        mixed = ~(act | dead)
        low = {"adaptive": mixed & (u >= -l), "zero": False, "one": mixed}[mode]
        alpha = np.where(act | low, 1.0, 0.0)
        with np.errstate(all="ignore"):
            span = np.where(mixed, u - l, 1.0)
            s = np.where(mixed, np.clip(u / span, 0.0, 1.0), alpha)
            t = np.where(mixed, np.maximum(fo.up(s * (-l)), fo.up(u - fo.down(s * u))), 0.0)
        if rec.pairs:
            idx = [p for p, _ in rec.pairs]
            idx2 = [q for _, q in rec.pairs]
            for arr, v1, v2 in ((alpha, 1.0, 0.0), (s, 1.0, 0.0), (t, 0.0, 0.0)):
                arr[..., idx, :] = v1
                arr[..., idx2, :] = v2
            mixed = mixed.copy()
            mixed[..., idx, :] = False
            mixed[..., idx2, :] = False
        neg = mu < 0
        use_chord = neg & mixed
        slope = np.where(use_chord, s, alpha)
        nu = mu * slope
        c = _absorb(c, np.where(use_chord, fo.err(nu), 0.0), rec.hmax[:, None])
        inter = np.where(use_chord, fo.down(mu * t), 0.0)  # <= 0
        c = fo.down(c - fo.sum_up((-inter).reshape(B, K, -1), axis=2))
        # H = W1 Z + b1
        Nf = nu.reshape(B, K, -1)
        c = _down_add(c, _lin_lower(Nf, np.repeat(b1m, n), None if b1r is None else np.repeat(b1r, n)))
        q = np.matmul(W1m.T, nu)  # (B, K, D, n)
        c = _absorb(c, fo.matmul_err(np.abs(W1m.T), np.abs(nu)), zmax)
        if W1r is not None:
            c = _absorb(c, fo.matmul_up(W1r.T, np.abs(nu)), zmax)
        c_ref = [c]
        lam = self._skip(lam, rec.skip, zmax, c_ref, extra=q)
        return lam, c_ref[0]

    def _concretize(self, a, c):
        """``min over |delta| <= h`` of ``<a, delta> + c``, rounded down: ``c - sum |a_i| h_i``."""
        hb = self._h[:, None, :]
        with np.errstate(invalid="ignore"):
            out = fo.down(c - fo.sum_up(fo.up(np.abs(a) * hb), axis=2))
        return np.where(np.isnan(out), -np.inf, out)


def _abs_max(bx: Boxes, Z: FTM):
    """An upper bound of ``|Z|`` over each box, entrywise (inf where not finite)."""
    lo, hi = bx.range(Z)
    m = np.maximum(np.abs(lo), np.abs(hi))
    return np.where(np.isnan(m), np.inf, m)


def linear_evaluator(model, prec: int = 128, fast: FloatBoxEvaluator | None = None):
    """A :class:`LinearBoundEvaluator` for ``model`` (on its float evaluator ``fast`` when
    given), or None where the float pass does not apply (hardmax attention, token input, no
    readout)."""
    if fast is None:
        fast = _float_evaluator(model, prec)
    if fast is None:
        return None
    return LinearBoundEvaluator(fast)
