"""Linear relaxation of softmax attention heads for the backward bounds of :mod:`symbounds.core.linear_bounds`.

One head of a layer, for query token ``j`` (``Z`` the layer's input, ``tau`` the optional scale):

    Q = W_Q Z,  K = W_K Z,  V = W_V Z,        d_jk = sum_a Q_aj K_ak,   s_jk = d_jk / tau - m_j,
    e_jk = exp(s_jk),  S_j = sum_k e_jk,  r_j = 1 / S_j,  pi_jk = e_jk r_j,  a_vj = sum_k pi_jk V_vk,

and the head adds ``W_O a`` to the layer's output (``m_j`` is a constant shift of each row, which
leaves the softmax unchanged).  A lower bound ``<mu, a> + c`` is substituted backwards to one in
``Z``, each node replaced by a line below it (coefficient >= 0) or above it (< 0) on its range:

* **products** ``x y`` (``pi V``, ``e r``, ``Q K``) with ``x in [lx, ux]``, ``y in [ly, uy]``: the
  McCormick planes ``x y >= ly x + lx y - lx ly`` or ``>= uy x + ux y - ux uy`` below, and
  ``x y <= uy x + lx y - lx uy`` or ``<= ly x + ux y - ux ly`` above (the one of each pair with
  the smaller gap at the middle of the ranges);
* **exp** (convex): below, the tangent at the middle ``t`` of the range with its value rounded
  down, ``E (1 + s - t)`` for ``E <= e^t`` (valid for every ``s``: where ``1 + s - t < 0`` it is
  negative); above, the chord, its intercept the larger of ``e^s - sigma s`` at the two ends
  rounded up (a convex function minus a line is largest at an end);
* **reciprocal** of ``S > 0`` (convex): below, ``-q S + 2 sqrt(q)`` for any ``q > 0`` (as
  ``1/S + q S >= 2 sqrt(q)``), with ``q = 1/t^2`` at the middle ``t``; above, the chord as for exp;
* sums and the affine maps ``W_Q``, ``W_K``, ``W_V``, ``W_O``, ``1/tau`` exactly.

The ranges of every node are the float pass's Taylor ranges met with interval bounds
(``pi in [0, 1]``, ``e`` between the exp bounds of the ends of ``s``, ...).  Rounding as in
:mod:`symbounds.core.linear_bounds`: each computed coefficient's error bound times an upper bound
of its quantity's magnitude moves into the constant, which is rounded down.
"""

from __future__ import annotations

import numpy as np

from . import outward as fo
from .float_boxes import FTM, Boxes

__all__ = ["absorb", "lower_dot", "head_records", "heads_backward"]


def absorb(c, E, vmax):
    """``c - sum E vmax`` rounded down (``E``, ``vmax`` >= 0; the sum over every axis after the first
    two, ``E`` of shape ``(B, K, ...)`` and ``vmax`` broadcasting against it)."""
    E = np.broadcast_to(E, np.broadcast_shapes(E.shape, np.shape(vmax)))
    with np.errstate(invalid="ignore"):
        p = np.where(E > 0, fo.up(E * vmax), 0.0)
    B, K = E.shape[:2]
    return fo.down(c - fo.sum_up(p.reshape(B, K, -1), axis=2))


def lower_dot(L, vm, vr=None):
    """A lower bound of ``sum_j L[b, k, j] v[b, j]`` for ``v`` in ``vm +- vr`` (``L`` of shape
    ``(B, K, M)``, ``vm`` and ``vr`` of shape ``(M,)`` or ``(B, M)``)."""
    vm = np.asarray(vm, dtype=np.float64)
    col = vm[..., :, None] if vm.ndim == 2 else vm[:, None]
    T = (L @ col)[..., 0]
    e = fo.matmul_err(np.abs(L), np.abs(col))[..., 0]
    out = fo.down(T - e)
    if vr is not None:
        vr = np.asarray(vr, dtype=np.float64)
        rc = vr[..., :, None] if vr.ndim == 2 else vr[:, None]
        out = fo.down(out - fo.matmul_up(np.abs(L), rc)[..., 0])
    return out


def _const_sum(c, terms):
    """``c + sum terms`` rounded down, ``terms`` (B, K, ...) lower bounds."""
    B, K = terms.shape[:2]
    t = terms.reshape(B, K, -1)
    pos = fo.sum_down(np.maximum(t, 0.0), axis=2)
    neg = fo.sum_up(np.maximum(-t, 0.0), axis=2)
    return fo.down(fo.down(c + pos) - neg)


def _sum_coef(c, P, axis, vmax):
    """``(sum of P over axis, c)``: the float sum, its a-priori error times ``vmax`` (which
    broadcasts against the sum) moved into ``c``."""
    S = P.sum(axis=axis)
    n = P.shape[axis]
    E = fo.up(fo.up(fo.sum_up(np.abs(P), axis=axis) * float(fo.up(2 * n * fo.U))) + n * fo.ETA)
    return S, absorb(c, E, vmax)


class _Node:
    """Bounds ``lo <= v <= hi`` of one quantity over each box, and ``vmax >= |v|``."""

    __slots__ = ("hi", "lo", "vmax")

    def __init__(self, lo, hi):
        lo = np.where(np.isnan(lo), -np.inf, lo)
        hi = np.where(np.isnan(hi), np.inf, hi)
        self.lo, self.hi = lo, hi
        self.vmax = np.maximum(np.abs(lo), np.abs(hi))


def _node(bx: Boxes, a: FTM, lo=None, hi=None) -> _Node:
    tl, th = bx.range(a)
    if lo is not None:
        tl = np.maximum(tl, lo)
    if hi is not None:
        th = np.minimum(th, hi)
    return _Node(tl, th)


def head_records(bx: Boxes, heads, tau, Z: FTM, ranges=None) -> list:
    """For each head of an attention layer (entries of the float evaluator's layer), its weights
    and the ranges of every node over the boxes, from Taylor models of ``Z``, met with ``ranges``
    (per head, ``(lo, hi)`` of ``Q``, ``K`` and ``V`` found otherwise) where given; the ranges of
    the scores are also met with the interval products of those of ``Q`` and ``K``."""
    recs = []
    for hh, head in enumerate(heads):
        WQ, WK, WV, WO = head.W_Q, head.W_K, head.W_V, head.W_O
        Q, K, V = bx.linear(WQ, Z), bx.linear(WK, Z), bx.linear(WV, Z)
        dot = bx.sum(bx.mul(Q[:, :, None], K[:, None, :]), 0)  # (B, n, n)
        s = dot if tau is None else bx.scale(tau, dot)
        m = s.c.max(axis=2, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        sh = bx.add(s, FTM(m, None, np.zeros_like(m)), -1.0)
        E = bx.exp(sh)
        Ssum = bx.sum(E, 1)
        R, ok = bx.reciprocal(Ssum)
        R3 = FTM(R.c[:, :, None], None if R.G is None else R.G[:, :, :, None], R.r[:, :, None])
        P = bx.mul(E, R3)
        A = bx.sum(bx.mul(FTM(P.c[:, None], None if P.G is None else P.G[:, :, None], P.r[:, None]),
                          V[:, None, :]), 2)  # (B, dv, n)
        rec = {"W": (WQ, WK, WV, WO), "tau": tau, "m": m[:, :, 0]}
        extra = ranges[hh] if ranges is not None else [(None, None)] * 3
        rec["Q"], rec["K"], rec["V"] = (_node(bx, a, *r) for a, r in zip((Q, K, V), extra))
        d_lo, d_hi = _interval_dot(rec["Q"], rec["K"])
        rec["d"] = _node(bx, dot, d_lo, d_hi)
        n_s = _node(bx, sh)
        if tau is None:
            n_s = _Node(np.maximum(n_s.lo, fo.down(rec["d"].lo - m)), np.minimum(n_s.hi, fo.up(rec["d"].hi - m)))
        rec["s"] = n_s
        e_lo, e_hi = fo.exp_lower(n_s.lo), fo.exp_upper(n_s.hi)
        rec["e"] = _node(bx, E, e_lo, e_hi)
        S_lo = fo.sum_down(np.maximum(rec["e"].lo, 0.0), axis=2)
        S_hi = fo.sum_up(rec["e"].hi, axis=2)
        rec["S"] = _node(bx, Ssum, S_lo, S_hi)
        Sn = rec["S"]
        good = Sn.lo > 0
        with np.errstate(all="ignore"):
            r_lo = np.where(good, fo.down(1.0 / Sn.hi), -np.inf)
            r_hi = np.where(good, fo.up(1.0 / np.where(good, Sn.lo, 1.0)), np.inf)
        rec["r"] = _node(bx, R, r_lo, r_hi)
        rec["pi"] = _node(bx, P, 0.0, 1.0)
        rec["a"] = _node(bx, A)
        rec["ok"] = good.all(axis=1) & ok.all(axis=1)
        recs.append(rec)
    return recs


def _interval_dot(Q: _Node, K: _Node):
    """``(lo, hi)`` of ``d_jk = sum_a Q_aj K_ak`` from the ranges of ``Q`` (B, dk, n) and ``K``."""
    ql, qu = Q.lo[:, :, :, None], Q.hi[:, :, :, None]
    kl, ku = K.lo[:, :, None, :], K.hi[:, :, None, :]
    with np.errstate(all="ignore"):
        p = [ql * kl, ql * ku, qu * kl, qu * ku]
        lo = fo.down(np.minimum(np.minimum(p[0], p[1]), np.minimum(p[2], p[3])))
        hi = fo.up(np.maximum(np.maximum(p[0], p[1]), np.maximum(p[2], p[3])))
        s_lo = -fo.sum_up(np.maximum(-lo, 0.0), axis=1)
        s_lo = fo.down(s_lo + fo.sum_down(np.maximum(lo, 0.0), axis=1))
        s_hi = fo.up(fo.sum_up(np.maximum(hi, 0.0), axis=1) - fo.sum_down(np.maximum(-hi, 0.0), axis=1))
    return np.where(np.isnan(s_lo), -np.inf, s_lo), np.where(np.isnan(s_hi), np.inf, s_hi)


def _mccormick(c, mu, x: _Node, y: _Node, xs, ys):
    """Coefficients ``(ax, ay)`` and the constant with ``mu x y >= ax x + ay y + const`` (``c``
    plus the plane's constant, rounded down, and the coefficients' rounding errors); ``xs``, ``ys``
    index/broadcast the node arrays ``(B, ...)`` to ``mu``'s shape ``(B, K, ...)``."""
    lx, ux, ly, uy = x.lo[xs], x.hi[xs], y.lo[ys], y.hi[ys]
    xm = lx * 0.5 + ux * 0.5
    ym = ly * 0.5 + uy * 0.5
    # below: (ly, lx, -lx ly) or (uy, ux, -ux uy); above: (uy, lx, -lx uy) or (ly, ux, -ux ly)
    first_lo = (xm - lx) * (ym - ly) <= (ux - xm) * (uy - ym)
    first_up = (xm - lx) * (uy - ym) <= (ux - xm) * (ym - ly)
    pos = mu >= 0
    sx = np.where(pos, np.where(first_lo, ly, uy), np.where(first_up, uy, ly))
    sy = np.where(pos, np.where(first_lo, lx, ux), np.where(first_up, lx, ux))
    with np.errstate(all="ignore"):
        k_lo = np.where(first_lo, fo.down(-(lx * ly)), fo.down(-(ux * uy)))
        k_up = np.where(first_up, fo.up(-(lx * uy)), fo.up(-(ux * ly)))
        k = np.where(pos, k_lo, k_up)
        ax, ay = mu * sx, mu * sy
        term = np.where(mu == 0, 0.0, fo.down(mu * k))
    c = _const_sum(c, term)
    c = absorb(c, fo.err(ax), x.vmax[xs])
    c = absorb(c, fo.err(ay), y.vmax[ys])
    return ax, ay, c


def _convex(c, mu, node: _Node, kind: str):
    """``(slope coefficient, c)`` with ``mu f(v) >= (mu sigma) v + const`` for ``f = exp`` or
    ``f = 1/v`` (``v > 0``), ``node`` the range of ``v`` broadcast to ``mu`` by a new axis 1."""
    lo, hi = node.lo[:, None], node.hi[:, None]
    with np.errstate(all="ignore"):
        t = lo * 0.5 + hi * 0.5
        if kind == "exp":
            Et = fo.exp_lower(t)
            s_tan = Et
            b_tan = fo.down(Et * fo.down(1.0 - t))
            f_lo, f_hi = fo.exp_upper(lo), fo.exp_upper(hi)
        else:
            q = 1.0 / (t * t)
            s_tan = -q
            b_tan = 2.0 * fo.down(np.sqrt(q))
            f_lo, f_hi = fo.up(1.0 / lo), fo.up(1.0 / hi)
        span = hi - lo
        flat = ~(span > 0)
        s_ch = np.where(flat, 0.0, (f_hi - f_lo) / np.where(flat, 1.0, span))
        b_ch = np.maximum(fo.up(f_lo - fo.down(s_ch * lo)), fo.up(f_hi - fo.down(s_ch * hi)))
        pos = mu >= 0
        slope = np.where(pos, s_tan, s_ch)
        b = np.where(pos, b_tan, b_ch)
        coef = mu * slope
        term = np.where(mu == 0, 0.0, fo.down(mu * b))
    c = _const_sum(c, term)
    c = absorb(c, fo.err(coef), node.vmax[:, None])
    return coef, c


def heads_backward(recs: list, lam, c, zmax):
    """``(coef, c)``: ``<lam, sum_h W_O^h a^h> + c_in >= <coef, Z> + c`` on each box (``lam`` of
    shape ``(B, K, D, n)``, ``zmax`` an upper bound of ``|Z|`` broadcasting as ``(B, 1, D, n)``).
    Boxes where a head's ranges are not usable get ``c = -inf``."""
    coef = np.zeros_like(lam)
    for rec in recs:
        WQ, WK, WV, WO = rec["W"]
        # the output map: <lam, W_O a> = <W_O^T lam, a>
        mu = np.matmul(WO[0].T, lam)  # (B, K, dv, n)
        amax = rec["a"].vmax[:, None]
        c = absorb(c, fo.matmul_err(np.abs(WO[0].T), np.abs(lam)), amax)
        if WO[1] is not None:
            c = absorb(c, fo.matmul_up(WO[1].T, np.abs(lam)), amax)
        # a_vj = sum_k pi_jk V_vk: mu (B,K,dv,n_j) -> terms over (v, j, k)
        mu5 = mu[:, :, :, :, None]
        ax, ay, c = _mccormick(c, mu5, rec["pi"], rec["V"], (slice(None), None, None), (slice(None), None, slice(None), None))
        c_pi, c = _sum_coef(c, ax, 2, rec["pi"].vmax[:, None])  # (B, K, n_j, n_k)
        c_V, c = _sum_coef(c, ay, 3, rec["V"].vmax[:, None])  # (B, K, dv, n_k)
        # pi_jk = e_jk r_j
        c_e, c_r, c = _mccormick(c, c_pi, rec["e"], rec["r"], (slice(None), None), (slice(None), None, slice(None), None))
        c_r, c = _sum_coef(c, c_r, 3, rec["r"].vmax[:, None])  # (B, K, n_j)
        # r = 1/S, then S = sum_k e_k
        c_S, c = _convex(c, c_r, rec["S"], "recip")
        c_e2 = c_e + c_S[:, :, :, None]
        c = absorb(c, fo.err(c_e2), rec["e"].vmax[:, None])
        # e = exp(s), s = d / tau - m
        c_s, c = _convex(c, c_e2, rec["s"], "exp")
        c = _const_sum(c, np.where(c_s == 0, 0.0, fo.down(c_s * -rec["m"][:, None, :, None])))
        tau = rec["tau"]
        if tau is None:
            c_d = c_s
        else:
            tm, tr = tau
            c_d = c_s * tm
            c = absorb(c, fo.err(c_d), rec["d"].vmax[:, None])
            if tr:
                c = absorb(c, fo.up(np.abs(c_s) * tr), rec["d"].vmax[:, None])
        # d_jk = sum_a Q_aj K_ak: terms over (a, j, k)
        cd5 = c_d[:, :, None]
        aq, ak, c = _mccormick(c, cd5, rec["Q"], rec["K"], (slice(None), None, slice(None), slice(None), None),
                               (slice(None), None, slice(None), None, slice(None)))
        c_Q, c = _sum_coef(c, aq, 4, rec["Q"].vmax[:, None])  # (B, K, dk, n_j)
        c_K, c = _sum_coef(c, ak, 3, rec["K"].vmax[:, None])  # (B, K, dk, n_k)
        # Q, K, V = W Z
        for Wb, cw in ((WQ, c_Q), (WK, c_K), (WV, c_V)):
            Wm, Wr = Wb
            q = np.matmul(Wm.T, cw)
            c = absorb(c, fo.matmul_err(np.abs(Wm.T), np.abs(cw)), zmax)
            if Wr is not None:
                c = absorb(c, fo.matmul_up(Wr.T, np.abs(cw)), zmax)
            new = coef + q
            c = absorb(c, fo.err(new), zmax)
            coef = new
        c = np.where(rec["ok"][:, None], c, -np.inf)
    return coef, c
