"""Linear bounds of a layer graph's outputs over a box by backward propagation (CROWN), in Arb balls.

Over a box ``x = x0 + delta``, ``|delta_i| <= h_i``, a lower bound of one output (an objective
``<Lambda, Y>``; an upper bound is the lower bound of ``-Y``) has the form

    <Lambda, Y> >= c + <a, delta>   >=   c - sum_i |a_i| h_i,

obtained as in CROWN (Zhang et al., NeurIPS 2018) by substituting the nodes backwards, from the
output to the input, each by a linear function of its input(s):

* **linear nodes** substitute exactly: ``affine`` ``<Lambda, W u + b> = <W^T Lambda, u> +
  <Lambda, b>``, ``add``, ``add/mul/div_constant``;
* **an entry-by-entry function** ``y = f(u)`` with ``u`` in ``[l, u]`` on the box is replaced by a
  line below it (where the coefficient ``lambda`` of ``y`` is ``>= 0``) or above it (where it is
  ``< 0``).  ReLU and leaky ReLU: exact where the sign of ``u`` is decided; else the chord above
  and CROWN's adaptive line below (slope 1 if ``u >= -l``, else 0, or ``alpha`` for the leaky
  one).  Every other function (tanh, sigmoid, softplus, exp, erf, both GELUs): the two lines
  parallel to the chord ``s = (f(u) - f(l)) / (u - l)``, ``s x + min (f - s x)`` and
  ``s x + max (f - s x)`` over ``[l, u]``; the minimum and maximum are enclosed on pieces of
  ``[l, u]`` with the function's own first-order Taylor model of one variable
  (:mod:`symbounds.core.activations`), in which ``f - s x`` keeps its cancellation, halving the
  pieces that reach furthest until the bound is within a thousandth of ``f``'s variation of a
  value taken (branch and bound);
* **every other node** (LayerNorm, RMSNorm, ...) enters as its first-order Taylor model from the
  forward pass, ``y in c + <g, delta> + [-r, r]``: ``<Lambda, y> >= <Lambda, c> + <g^T Lambda,
  delta> - <|Lambda|, r>``.

The range ``[l, u]`` of a function's input is its Taylor model's range met with the same backward
bounds of that input (one objective per entry and sign, through the nodes before it), as CROWN
computes its intermediate bounds.

Rounding.  Every coefficient and constant is an Arb ball, so the rounding is carried along: the
sign test takes the ball's midpoint ``m`` (exact) and the rest ``lambda - m`` (within the ball's
radius ``rho``) multiplies the function's whole range, ``rho [-1, 1] f([l, u])``, a constant ball;
the constants are balls whose lower ends are kept.  A bound that is not finite gives no bound
(the caller keeps its Taylor-model enclosure).  Nothing here decides anything: the caller meets
these bounds with the Taylor-model enclosure of the same box.
"""

from __future__ import annotations

from fractions import Fraction

import flint

from . import graph as gr
from .contexts import BallContext
from .taylor import TaylorContext

__all__ = ["linear_graph_bounds", "SMALL_ENTRIES", "small_graph"]

#: pieces of ``[l, u]`` on which ``f - s x`` is enclosed first, the most evaluations in all, and
#: the tolerance (a part of the function's variation over ``[l, u]``) at which the halving stops
PIECES, MAX_PIECES, TOL = 8, 48, flint.arb(1) / 1000
#: entry-by-entry functions relaxed by lines parallel to their chord
_SMOOTH = (*(op for op in gr.UNARY if op != "relu"), "gelu", "gelu_tanh")
#: the linear nodes, substituted exactly
_LINEAR = ("affine", "add", *gr.CONSTANT_OPS)
#: the backward passes per bound, each objective keeping its best: the lines through 0 of the
#: undecided ReLUs with CROWN's adaptive slope, with slope alpha, with slope 1 (every choice is valid)
MODES = (0, 1, 2)
#: the graphs ``bound`` meets with these bounds by default: at most this many entries per tensor
#: times tensors (the work of one backward pass per relaxed node grows like its square)
SMALL_ENTRIES = 1 << 10


def small_graph(graph) -> bool:
    """Small enough for the default ``bound`` (``linear="auto"``): the entries of all tensors."""
    return graph.tokens * sum(graph.widths[nd.name] for nd in graph.nodes) <= SMALL_ENTRIES


def _frac(x: flint.arb) -> Fraction:
    """The exact value of a radius-0 ball (an end taken with ``lower()``/``upper()``)."""
    if x.rad() != 0:
        raise ValueError("not an exact ball")
    m, e = x.man_exp()
    m, e = int(m), int(e)
    return Fraction(m * 2**e) if e >= 0 else Fraction(m, 2**-e)


def _finite(x: flint.arb) -> bool:
    return x.is_finite()


class _Relaxation:
    """Lines below and above ``f`` on ``[l, u]``: ``f(x) >= sl x + bl``, ``f(x) <= su x + bu``
    (exact balls), and ``rng``, a ball of ``f([l, u])``.  For a (leaky) ReLU whose sign is not
    decided, ``through0`` lists the slopes of the lines through 0 a backward pass may take instead
    (below for ``alpha <= 1``, above for ``alpha > 1``), by :data:`MODES`."""

    __slots__ = ("sl", "bl", "su", "bu", "rng", "through0", "below")

    def __init__(self, sl, bl, su, bu, rng, through0=None, below=True):
        self.sl, self.bl, self.su, self.bu, self.rng = sl, bl, su, bu, rng
        self.through0, self.below = through0, below

    def lines(self, mode: int):
        """``(sl, bl, su, bu)`` of backward pass ``mode``."""
        if self.through0 is None:
            return self.sl, self.bl, self.su, self.bu
        t = self.through0[mode]
        return (t, self.bl, self.su, self.bu) if self.below else (self.sl, self.bl, t, self.bu)


def _piecewise_linear(op: str, alpha, lo: flint.arb, hi: flint.arb) -> _Relaxation:
    """ReLU (``alpha = 0``) and leaky ReLU on ``[lo, hi]``: convex for ``alpha <= 1`` (the chord
    above, a line through 0 below), concave above 1 (the chord below, a line through 0 above)."""
    one, zero = flint.arb(1), flint.arb(0)
    a = zero if op == "relu" else flint.arb(alpha)
    if lo >= 0:
        return _Relaxation(one, zero, one, zero, lo.union(hi))
    if hi <= 0:
        return _Relaxation(a, zero, a, zero, (a * lo).union(a * hi))
    # any slope between a and 1 through 0 is on the other side of f from the chord: 1 where the
    # positive part is the longer (CROWN's adaptive choice), else a; or always a, or always 1
    through0 = (one if hi >= -lo else a, a, one)
    s = ((hi - a * lo) / (hi - lo)).mid()  # the chord's slope, rounded: the offset below makes it valid
    ends = ((a - s) * lo, (one - s) * hi)  # f - s x at the two ends
    rng = (a * lo).union(hi).union(zero)
    if a <= 1:  # above both ends: above the convex f
        t1, t2 = (e.upper() for e in ends)
        return _Relaxation(through0[0], zero, s, t1 if t1 >= t2 else t2, rng, through0, True)
    t1, t2 = (e.lower() for e in ends)
    return _Relaxation(s, t1 if t1 <= t2 else t2, through0[0], zero, rng, through0, False)


def _smooth(graph, nd, lo: flint.arb, hi: flint.arb, prec: int) -> _Relaxation | None:
    """Lines parallel to the chord of ``f`` (node ``nd``'s function) on ``[lo, hi]`` (exact ends)."""
    with BallContext(prec).scope():
        return _smooth_lines(graph, nd, lo, hi, prec)


def _piece(graph, nd, s, mid: Fraction, half: Fraction, prec: int):
    """Over ``mid +- half``: balls of ``f - s x``, of ``f``, and of ``f - s x`` at ``mid``."""
    c = TaylorContext(prec, [mid], [half])
    with c.scope():
        (x,) = c.inputs()
        y = gr._row(c, nd, graph.numeric(c)[nd.name], [[x]])[0]
        z = y - x * c.const(s)
        return z.range(), y.range(), z.c


def _smooth_lines(graph, nd, lo, hi, prec):
    """The chord's slope ``s`` and ``min``/``max`` of ``f - s x`` on ``[lo, hi]``, each to within
    :data:`TOL` of the function's variation: the pieces (first :data:`PIECES`) whose enclosure
    reaches furthest are halved, at most :data:`MAX_PIECES` evaluations in all (branch and bound;
    the bound is the furthest end over all pieces, so it is rigorous whenever it stops)."""
    ql, qh = _frac(lo), _frac(hi)
    if ql == qh:
        z, y, _ = _piece(graph, nd, flint.arb(0), ql, Fraction(0), prec)
        if not (_finite(z) and _finite(y)):
            return None
        return _Relaxation(flint.arb(0), z.lower(), flint.arb(0), z.upper(), y)
    ball = BallContext(prec)
    ends = [gr._row(ball, nd, graph.numeric(ball)[nd.name], [[ball.convert(q)]])[0] for q in (ql, qh)]
    s = ((ends[1] - ends[0]) / ball.convert(qh - ql)).mid()
    if not _finite(s):
        return None
    step = (qh - ql) / PIECES
    pieces = []  # (mid, half, range of f - s x, range of f, f - s x at mid)
    for k in range(PIECES):
        m, h = ql + step * (k + Fraction(1, 2)), step / 2
        z, y, zc = _piece(graph, nd, s, m, h, prec)
        if not (_finite(z) and _finite(y)):
            return None
        pieces.append((m, h, z, y, zc))
    rng = pieces[0][3]
    for p in pieces[1:]:
        rng = rng.union(p[3])
    span = (rng.upper() - rng.lower()) + abs(s) * ball.convert(qh - ql)
    tol = span * TOL
    count = PIECES
    ends = []
    for side in (-1, 1):  # the minimum, then the maximum, of f - s x
        work = list(pieces)
        while True:
            far = max(work, key=lambda p: float(-p[2].lower() if side < 0 else p[2].upper()))
            reach = far[2].lower() if side < 0 else far[2].upper()
            seen = [p[4].lower() if side > 0 else p[4].upper() for p in work]
            best = max(seen) if side > 0 else min(seen)  # a value f - s x certainly takes (or beyond)
            if abs(reach - best) <= tol or count >= MAX_PIECES:
                break
            work.remove(far)
            m, h = far[0], far[1]
            for mm in (m - h / 2, m + h / 2):
                z, y, zc = _piece(graph, nd, s, mm, h / 2, prec)
                if not (_finite(z) and _finite(y)):
                    return None
                work.append((mm, h / 2, z, y, zc))
            count += 2
        # the rigorous end: the furthest reach over every piece (float keys only choose the order)
        vals = [p[2].lower() for p in work] if side < 0 else [p[2].upper() for p in work]
        e = vals[0]
        for v in vals[1:]:
            e = v if (v < e if side < 0 else v > e) else e
        ends.append(e)
    return _Relaxation(s, ends[0], s, ends[1], rng)


class _Backward:
    """One backward pass from a tensor's entries (every entry, both signs) to the input."""

    def __init__(self, graph, ctx: TaylorContext, vals: dict, relax: dict):
        self.g, self.ctx, self.vals, self.relax = graph, ctx, vals, relax
        self.n = graph.input_count

    def bounds(self, name: str, upto: int):
        """``[(lower, upper)]`` (exact balls) of every entry of tensor ``name`` (row by row), the
        nodes ``0 .. upto - 1`` substituted, the best of the passes of :data:`MODES` (a single one
        when no undecided ReLU lies before); None where a bound is not finite."""
        modes = MODES if any(self.relax.get(nd.name) and any(r.through0 for r in self.relax[nd.name])
                             for nd in self.g.nodes[:upto]) else MODES[:1]
        best = None
        for mode in modes:
            out = self._pass(name, upto, mode)
            if best is None:
                best = out
                continue
            for e, (b, o) in enumerate(zip(best, out)):
                if o is None:
                    continue
                if b is None:
                    best[e] = o
                    continue
                lo = o[0] if o[0] > b[0] else b[0]
                hi = o[1] if o[1] < b[1] else b[1]
                best[e] = (lo, hi)
        return best

    def _pass(self, name: str, upto: int, mode: int):
        g = self.g
        T, w = g.tokens, g.widths[name]
        K = 2 * T * w
        lam = {name: []}
        for t in range(T):
            M = flint.arb_mat(K, w)
            for j in range(w):
                e = t * w + j
                M[2 * e, j] = 1
                M[2 * e + 1, j] = -1
            lam[name].append(M)
        const = flint.arb_mat(K, 1)
        coef = flint.arb_mat(K, self.n)
        for nd in reversed(g.nodes[:upto]):
            L = lam.pop(nd.name, None)
            if L is not None:
                const = self._node(nd, L, lam, const, coef, mode)
        L = lam.pop(g.input_name, None)
        if L is not None:
            for t in range(T):
                for k in range(K):
                    for j in range(g.in_width):
                        a = L[t][k, j]
                        i = t * g.in_width + j
                        const[k, 0] += a * self.ctx.x0[i]
                        coef[k, i] += a
        out = []
        for e in range(T * w):
            ends = []
            for k in (2 * e, 2 * e + 1):
                v = const[k, 0]
                for i in range(self.n):
                    v += coef[k, i] * flint.arb(0, self.ctx.h[i].upper())
                ends.append(v.lower() if _finite(v) else None)
            lo, neg = ends
            out.append(None if lo is None or neg is None else (lo, -neg))
        return out

    @staticmethod
    def _add(lam: dict, name: str, L: list):
        if name in lam:
            lam[name] = [a + b for a, b in zip(lam[name], L)]
        else:
            lam[name] = L

    def _node(self, nd, L, lam, const, coef, mode):
        g, op = self.g, nd.op
        T = g.tokens
        K = L[0].nrows()
        win = g.widths[nd.inputs[0]] if nd.inputs[0] != g.input_name else g.in_width
        if op == "affine":
            p = g.numeric(self.ctx.ball)[nd.name]
            for t in range(T):
                const += L[t] * p["bm"]
            self._add(lam, nd.inputs[0], [Lt * p["Wm"] for Lt in L])
            return const
        if op == "add":
            self._add(lam, nd.inputs[0], L)
            self._add(lam, nd.inputs[1], [flint.arb_mat(Lt) for Lt in L])
            return const
        if op in gr.CONSTANT_OPS:
            cs = g.numeric(self.ctx.ball)[nd.name]["c"]
            cs = cs if len(cs) == win else cs * win
            if op == "add_constant":
                for t in range(T):
                    const += L[t] * flint.arb_mat([[c] for c in cs])
                self._add(lam, nd.inputs[0], L)
                return const
            D = flint.arb_mat(win, win)
            for j, c in enumerate(cs):
                D[j, j] = c if op == "mul_constant" else 1 / c
            self._add(lam, nd.inputs[0], [Lt * D for Lt in L])
            return const
        rel = self.relax.get(nd.name)
        if rel is not None:  # an entry-by-entry function, relaxed
            out = []
            for t in range(T):
                M = flint.arb_mat(K, win)
                for j in range(win):
                    r = rel[t * win + j]
                    sl, bl, su, bu = r.lines(mode)
                    for k in range(K):
                        a = L[t][k, j]
                        if a == 0:
                            continue
                        m = a.mid()
                        rho = a.rad()
                        if rho != 0:
                            const[k, 0] += flint.arb(0, rho) * r.rng
                        if m >= 0:
                            M[k, j] = m * sl
                            const[k, 0] += m * bl
                        else:
                            M[k, j] = m * su
                            const[k, 0] += m * bu
                out.append(M)
            self._add(lam, nd.inputs[0], out)
            return const
        # any other node: its Taylor model from the forward pass
        Y = self.vals[nd.name]
        w = g.widths[nd.name]
        for t in range(T):
            for j in range(w):
                y = Y[t][j]
                for k in range(K):
                    a = L[t][k, j]
                    if a == 0:
                        continue
                    const[k, 0] += a * y.c
                    if y.r is not None:
                        const[k, 0] += a * flint.arb(0, y.r.upper())
                    if y.g is not None:
                        for i, gi in enumerate(y.g):
                            coef[k, i] += a * gi
        return const


def _forward(graph, ctx: TaylorContext) -> dict | None:
    """Every tensor of the graph as rows of Taylor models over the context's box."""
    num = graph.numeric(ctx)
    xs = ctx.inputs()
    w = graph.in_width
    vals = {graph.input_name: [xs[t * w:(t + 1) * w] for t in range(graph.tokens)]}
    for nd in graph.nodes:
        args = [vals[i] for i in nd.inputs]
        vals[nd.name] = [gr._row(ctx, nd, num[nd.name], [a[t] for a in args]) for t in range(graph.tokens)]
    return vals


def linear_graph_bounds(graph, centre, half, prec: int = 128):
    """``[(lower, upper)]`` (exact balls, the outputs row by row) of the graph over the box
    ``centre +- half``, or None where a bound is not finite (see the module docstring)."""
    ctx = TaylorContext(prec, centre, half)
    with ctx.scope():
        try:
            vals = _forward(graph, ctx)
        except (ZeroDivisionError, ValueError, TypeError):
            return None
        relax: dict = {}
        back = _Backward(graph, ctx, vals, relax)
        for i, nd in enumerate(graph.nodes):
            if nd.op not in _SMOOTH and nd.op not in ("relu", "leaky_relu"):
                continue
            src = nd.inputs[0]
            rows = vals[src]
            tm = [v.range() for row in rows for v in row]
            if not all(_finite(r) for r in tm):
                return None
            k = next(j for j, m in enumerate(graph.nodes) if m.name == src) + 1 if src != graph.input_name else 0
            lin = back.bounds(src, k) if k else [(r.lower(), r.upper()) for r in tm]
            rel = []
            for e, r in enumerate(tm):
                lo, hi = r.lower(), r.upper()
                if lin[e] is not None:
                    lo = lin[e][0] if lin[e][0] > lo else lo
                    hi = lin[e][1] if lin[e][1] < hi else hi
                if lo > hi:  # rounding alone: take the Taylor range
                    lo, hi = r.lower(), r.upper()
                if nd.op in ("relu", "leaky_relu"):
                    alpha = None if nd.op == "relu" else graph.numeric(ctx.ball)[nd.name]["alpha"]
                    rel.append(_piecewise_linear(nd.op, alpha, lo, hi))
                else:
                    x = _smooth(graph, nd, lo, hi, prec)
                    if x is None:
                        return None
                    rel.append(x)
            relax[nd.name] = rel
        out = back.bounds(graph.output, len(graph.nodes))
    return None if any(b is None for b in out) else out
