"""Linear bounds of a layer graph's outputs over a box by backward propagation (CROWN), in Arb balls.

Over a box ``x = x0 + delta``, ``|delta_i| <= h_i``, a lower bound of one output (an objective
``<Lambda, Y>``; an upper bound is the lower bound of ``-Y``) has the form

    <Lambda, Y> >= c + <a, delta>   >=   c - sum_i |a_i| h_i,

obtained as in CROWN (Zhang et al., NeurIPS 2018) by substituting the nodes backwards, from the
output to the input, each by a linear function of its input(s):

* **linear nodes** substitute exactly: ``affine`` ``<Lambda, W u + b> = <W^T Lambda, u> +
  <Lambda, b>``, ``add``, ``add/mul/div_constant``, and ``slice``, ``concat``, ``select_tokens``,
  ``mean_tokens`` (coefficients moved between columns and rows, or spread over a sequence);
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
* **LayerNorm and RMSNorm** are taken apart (:func:`_norm_ops`): the centring and the mean are
  affine, the square and the reciprocal root are functions as above, and each product ``d_j s`` is
  bounded by McCormick's planes (:meth:`_Bounds._bilinear`); the output's forward model and its
  range are met with the a-priori bound ``b_i +- sqrt(n - 1) |w_i|`` (RMSNorm ``+- sqrt(n) |w_i|``,
  :func:`symbounds.core.graph.norm_cap_square`), whatever the input, and in the pass that takes
  the attention as its Taylor model the norm's output enters as its capped forward model too
  (where ``s``'s range is wide the McCormick planes of ``d_j s`` are loose, the cap is not);
* **softmax attention** is taken apart (:func:`_attention_ops`): the projections are affine, the
  score differences ``d_jkl = scale <q_j, k_l - k_k>`` are sums of products bounded by McCormick's
  planes (with the ranges of ``q_j`` and of ``k_l - k_k``, each met with its own backward
  bounds), ``e = exp(d)`` and the weight ``w_jk = 1 / (1 + sum_(l != k) e_jkl)`` (the softmax
  divided through by ``e^(s_k)``, so the reciprocal's input is ``>= 1``) are convex functions
  with closed-form lines (:func:`_convex`), and ``o_j = sum_k w_jk v_k`` is McCormick's again,
  the weights' ranges met with ``[0, 1]``.  One more backward pass takes the node instead as its
  first-order Taylor model from the forward pass (below), each bound keeping the better;
* **hardmax attention** (any other node) enters as its first-order Taylor model from the forward
  pass, ``y in c + <g, delta> + [-r, r]``: ``<Lambda, y> >= <Lambda, c> + <g^T Lambda, delta> -
  <|Lambda|, r>``.

The range ``[l, u]`` of a function's input is its Taylor model's range met with the same backward
bounds of that input (one objective per entry and sign, through the nodes before it, one pass per
row), as CROWN computes its intermediate bounds.

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

from . import activations as act
from . import graph as gr
from . import graph_tokens as gt
from .contexts import BallContext, Undecided
from .exact import arb_to_fraction
from .taylor import TaylorContext

__all__ = ["linear_graph_bounds", "linear_graph_objective_bounds", "SMALL_ENTRIES", "small_graph"]

#: pieces of ``[l, u]`` on which ``f - s x`` is enclosed first, the most evaluations per end, and
#: the tolerance (a part of the function's variation over ``[l, u]``) at which the halving stops
PIECES, MAX_PIECES, TOL = 8, 48, flint.arb(1) / 1000
#: entry-by-entry functions relaxed by lines parallel to their chord
_SMOOTH = (*(op for op in gr.UNARY if op != "relu"), "gelu", "gelu_tanh")
#: the backward passes per bound, each objective keeping its best: the lines through 0 of the
#: undecided ReLUs with CROWN's adaptive slope, with slope alpha, with slope 1 (every choice is valid)
MODES = (0, 1, 2)
#: the graphs ``bound`` meets with these bounds by default: at most this many entries per tensor
#: times tensors (the work of one backward pass per relaxed node grows like its square)
SMALL_ENTRIES = 1 << 10


def small_graph(graph) -> bool:
    """Small enough for the default ``bound`` (``linear="auto"``): the entries of all tensors."""
    return sum(graph.tokens_of[nd.name] * graph.widths[nd.name] for nd in graph.nodes) <= SMALL_ENTRIES


def _frac(x: flint.arb) -> Fraction:
    """The exact value of a radius-0 ball (an end taken with ``lower()``/``upper()``)."""
    if x.rad() != 0:
        raise ValueError("not an exact ball")
    return arb_to_fraction(x)


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


def _smooth(f, lo: flint.arb, hi: flint.arb, prec: int) -> _Relaxation | None:
    """Lines parallel to the chord of ``f`` (``f(ctx, v)``, in balls and Taylor models) on
    ``[lo, hi]`` (exact ends)."""
    with BallContext(prec).scope():
        return _smooth_lines(f, lo, hi, prec)


def _piece(f, s, mid: Fraction, half: Fraction, prec: int):
    """Over ``mid +- half``: balls of ``f - s x``, of ``f``, and of ``f - s x`` at ``mid``; the first
    two from the Taylor model met with plain balls (the tighter on a wide piece, where a Taylor
    model's remainder grows with the square of the width)."""
    c = TaylorContext(prec, [mid], [half])
    with c.scope():
        (x,) = c.inputs()
        y = c.convert(f(c, x))
        z = y - x * c.const(s)
        zr, yr = z.range(), y.range()
        ball = c.ball
        xb = ball.convert(mid - half).union(ball.convert(mid + half))
        yb = f(ball, xb)
        if _finite(yb):
            zb = yb - s * xb
            yr = yb if not _finite(yr) else (yr.intersection(yb) if yr.overlaps(yb) else yr)
            zr = zb if not _finite(zr) else (zr.intersection(zb) if zr.overlaps(zb) else zr)
        return zr, yr, z.c


def _smooth_lines(f, lo, hi, prec):
    """The chord's slope ``s`` and ``min``/``max`` of ``f - s x`` on ``[lo, hi]``, each to within
    :data:`TOL` of the function's variation: the pieces (first :data:`PIECES`) whose enclosure
    reaches furthest are halved, at most :data:`MAX_PIECES` evaluations per end (branch and bound;
    the bound is the furthest end over all pieces, so it is rigorous whenever it stops)."""
    ql, qh = _frac(lo), _frac(hi)
    if ql == qh:
        z, y, _ = _piece(f, flint.arb(0), ql, Fraction(0), prec)
        if not (_finite(z) and _finite(y)):
            return None
        return _Relaxation(flint.arb(0), z.lower(), flint.arb(0), z.upper(), y)
    ball = BallContext(prec)
    ends = [f(ball, ball.convert(q)) for q in (ql, qh)]
    s = ((ends[1] - ends[0]) / ball.convert(qh - ql)).mid()
    if not _finite(s):
        return None
    step = (qh - ql) / PIECES
    pieces = []  # (mid, half, range of f - s x, range of f, f - s x at mid)
    for k in range(PIECES):
        m, h = ql + step * (k + Fraction(1, 2)), step / 2
        z, y, zc = _piece(f, s, m, h, prec)
        if not (_finite(z) and _finite(y)):
            return None
        pieces.append((m, h, z, y, zc))
    rng = pieces[0][3]
    for p in pieces[1:]:
        rng = rng.union(p[3])
    # the tolerance: a part of the variation of f - s x seen at points (ends and piece centres), plus
    # that of s x, so that an enclosure blown up on one piece does not loosen it
    seen = [p[4] for p in pieces] + [e - s * ball.convert(q) for e, q in zip(ends, (ql, qh))]
    top = max(float(v.mid()) for v in seen) - min(float(v.mid()) for v in seen)
    tol = ball.convert(Fraction(top)) * TOL + abs(s) * ball.convert(qh - ql) * TOL
    ends = []
    for side in (-1, 1):  # the minimum, then the maximum, of f - s x (each its own budget)
        work, count = list(pieces), PIECES
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
                z, y, zc = _piece(f, s, mm, h / 2, prec)
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


class _Op:
    """One operation of the graph as the backward pass sees it (a LayerNorm or RMSNorm becomes
    six): ``kind`` "affine" (``W``, ``b`` as Arb matrices), "add", "unary" (``f(ctx, v)``, its
    input known to lie in ``[lo, inf)`` when ``lo`` is given), "relu" (``alpha``), "bilinear"
    (``p_j = d_j s``, ``s`` of width 1), "slice", "concat", "select", "mean" (rows or columns
    taken, exactly) or "cut" (the graph's node ``node``, entering as its Taylor model);
    ``forward(ctx, rows)`` computes one row from one row of each input, or, with ``tensor``, the
    whole output from the inputs' rows."""

    __slots__ = ("name", "kind", "inputs", "width", "W", "b", "f", "lo", "alpha", "node", "forward", "tensor",
                 "convex", "fin", "att", "cut", "cap")

    def __init__(self, name, kind, inputs, width, forward, **kw):
        self.name, self.kind, self.inputs, self.width, self.forward = name, kind, tuple(inputs), width, forward
        self.W = self.b = self.f = self.lo = self.alpha = self.node = None
        self.convex = self.fin = self.att = self.cap = None
        self.tensor = self.cut = False
        for k, v in kw.items():
            setattr(self, k, v)


def _q(v) -> flint.arb:
    return flint.arb(v.numerator) / v.denominator if isinstance(v, Fraction) else flint.arb(v)


def _start_entry(a: Fraction) -> flint.arb:
    """An objective's coefficient as the pass starts from it: a ball holding the exact rational
    ``a`` (rounded outward at the current precision)."""
    return _q(a)


def _affine_op(name, src, W, b, forward=None):
    """``W x + b`` from exact rational ``W`` (rows) and ``b`` (balls made at the caller's precision)."""
    Wm = flint.arb_mat([[_q(v) for v in row] for row in W])
    bm = flint.arb_mat([[_q(v)] for v in b])
    if forward is None:
        def forward(ctx, rows, W=W, b=b):
            x = rows[0]
            return [ctx.affine_combination(ctx.convert(bi), [ctx.convert(v) for v in Wi], x) for Wi, bi in zip(W, b)]
    return _Op(name, "affine", [src], len(W), forward, W=Wm, b=bm)


def _norm_ops(nd, src: str, n: int) -> list:
    """LayerNorm ``(x - mean x) s w + b`` / RMSNorm ``x s w``, ``s = 1/sqrt(mean(d^2) + eps)``, as
    affine maps, the square, the reciprocal root, and the products ``d_j s``.  The last op (the
    node's own output) carries ``cap``, the a-priori balls ``b_i + [-1, 1] sqrt(n - 1) |w_i|``
    (RMSNorm ``[-1, 1] sqrt(n) |w_i|``; :func:`symbounds.core.graph.norm_cap_square`): its forward
    Taylor model is met with them (:func:`symbounds.core.graph.meet_caps`) and so is its range
    (:meth:`_Bounds.range`), so the relaxations after the norm start from the capped range; it is
    also ``cut``: the pass that takes the attention as its Taylor model (one more pass where there
    is none) takes the norm's output as its capped forward model."""
    p, name = nd.params, nd.name
    eps = p["eps"]
    eps_q = flint.fmpq(eps.numerator, eps.denominator)
    ops = []
    if nd.op == "layer_norm":
        centre = [[Fraction(int(i == j)) - Fraction(1, n) for j in range(n)] for i in range(n)]
        ops.append(_affine_op(f"{name}/d", src, centre, [Fraction(0)] * n))
        d = f"{name}/d"
    else:
        d = src
    ops.append(_Op(f"{name}/sq", "unary", [d], n, lambda ctx, rows: [gr.square(ctx, v) for v in rows[0]], f=gr.square))
    ops.append(_affine_op(f"{name}/v", f"{name}/sq", [[Fraction(1, n)] * n], [eps]))
    rs = lambda ctx, v: act.rsqrt_from(ctx, v, eps_q)
    ops.append(_Op(f"{name}/s", "unary", [f"{name}/v"], 1, lambda ctx, rows: [rs(ctx, rows[0][0])], f=rs, lo=eps))
    ops.append(_Op(f"{name}/p", "bilinear", [d, f"{name}/s"], n,
                   lambda ctx, rows: [v * rows[1][0] for v in rows[0]]))
    bias = p.get("bias", (Fraction(0),) * n)
    diag = [[p["weight"][i] if i == j else Fraction(0) for j in range(n)] for i in range(n)]
    out = _affine_op(name, f"{name}/p", diag, bias)
    # the a-priori bound b_i +- sqrt(k) |w_i| of every output (graph.norm_cap_square), balls at the
    # current precision: the forward model is met with it, and so is the output's range
    caps = gr.norm_caps([_q(v) for v in p["weight"]], [_q(v) for v in bias] if nd.op == "layer_norm" else None,
                        gr.norm_cap_square(nd.op, n))
    inner = out.forward
    out.forward = lambda ctx, rows: gr.meet_caps(ctx, inner(ctx, rows), caps)
    out.cap, out.cut = caps, True
    ops.append(out)
    return ops


class _Att:
    """The shape of a softmax attention node's relaxation: ``H`` heads of query/key width ``dk``
    and value width ``dv``, sequences of ``L`` rows (``seq_of[t]``: row ``t``'s sequence and its
    position in it), the keys each position attends (``keys``), and ``scale`` (a ball, set per
    precision).  Tensor ``d`` has, per row and head ``i``, one column per ordered pair ``(k, l)``,
    ``k != l``, of positions (:meth:`pair`); ``w`` one per position (:meth:`key`)."""

    def __init__(self, graph, nd):
        p = nd.params
        self.H = int(p["heads"])
        self.Eq, self.Ev = len(p["Wq"]), len(p["Wv"])
        self.dk, self.dv = self.Eq // self.H, self.Ev // self.H
        T = graph.tokens_of[nd.inputs[0]]
        self.L = p.get("sequence_length") or T
        self.keys = gt.allowed_keys(p.get("mask"), self.L)
        self.seqs = gt.sequences(T, self.L, p.get("layout") or "batch_major")
        self.seq_of = {}
        for s, seq in enumerate(self.seqs):
            for jp, t in enumerate(seq):
                self.seq_of[t] = (s, jp)
        self.scale = p["scale"]

    def pair(self, i: int, k: int, l: int) -> int:
        L = self.L
        return i * L * (L - 1) + k * (L - 1) + (l if l < k else l - 1)

    def key(self, i: int, k: int) -> int:
        return i * self.L + k

    def scale_ball(self) -> flint.arb:
        """The score factor as a ball at the current precision (``1/sqrt(n)`` enclosed)."""
        s = self.scale
        if isinstance(s, dict):
            return 1 / flint.arb(int(s["inv_sqrt"])).sqrt()
        return _q(s)


def _blank(ctx, n: int) -> list:
    """``n`` models enclosing nothing (infinite): the forward pass's value of a tensor whose model
    failed; its ranges then come from the backward bounds alone."""
    return [TaylorContext.hull(ctx, flint.arb(0, flint.arb("inf"))) for _ in range(n)]


def _attention_ops(graph, nd, src: str) -> list:
    """Softmax attention (:mod:`symbounds.core.graph_tokens`) taken apart, per head ``i`` and query
    row ``j`` of a sequence (positions ``k, l`` among the keys ``j`` attends)::

        q = Wq x + bq,  k = Wk x + bk,  v = Wv x + bv                      (affine, per row)
        d_jkl = scale <q_j^i, k_l^i - k_k^i>                             ("scores": McCormick)
        e_jkl = exp(d_jkl)                                                (convex: chord, tangent)
        z_jk = 1 + sum_(l != k) e_jkl                                     (affine, per row)
        w_jk = 1 / z_jk                                                   (convex on [1, inf))
        o_j^i = sum_k w_jk v_k^i                                          ("mix": McCormick)
        y_j = Wo [o_j^1; ...; o_j^H] + bo                                 (affine)

    ``w_jk = e^(s_k) / sum_l e^(s_l)`` exactly (the softmax divided through by ``e^(s_k)``), so
    ``z >= 1`` by construction and the reciprocal is relaxed on ``[1, inf)`` met with ``z``'s
    range.  The pairs ``(k, l)`` a query does not attend, and the keys it does not attend, are the
    constants 0 and 1 and receive no coefficient.  The forward pass gives the node's own model
    (:func:`symbounds.core.graph_tokens.attention`, the tighter) to the output; a backward pass
    with ``cut`` takes that model instead of the relaxation."""
    p, name = nd.params, nd.name
    A = _Att(graph, nd)
    zeros = lambda n: [Fraction(0)] * n
    ops = [_affine_op(f"{name}/q", src, p["Wq"], p.get("bq") or zeros(A.Eq)),
           _affine_op(f"{name}/k", src, p["Wk"], p.get("bk") or zeros(A.Eq)),
           _affine_op(f"{name}/v", src, p["Wv"], p.get("bv") or zeros(A.Ev))]
    L, H = A.L, A.H
    nd_w, nz = H * L * (L - 1), H * L

    def scores(ctx, args):
        Q, K = args
        sc = graph.numeric(ctx)[name]["scale"]
        out = []
        for t in range(len(Q)):
            s, jp = A.seq_of[t]
            seq, row = A.seqs[s], [ctx.zero] * nd_w
            try:
                for i in range(H):
                    hk = slice(i * A.dk, (i + 1) * A.dk)
                    q = Q[t][hk]
                    for k in A.keys[jp]:
                        for l in A.keys[jp]:
                            if l != k:
                                diff = [a - b for a, b in zip(K[seq[l]][hk], K[seq[k]][hk])]
                                row[A.pair(i, k, l)] = gt.dot(ctx, q, diff) * sc
            except (Undecided, ZeroDivisionError, ValueError):
                row = _blank(ctx, nd_w)
            out.append(row)
        return out

    ops.append(_Op(f"{name}/d", "scores", [f"{name}/q", f"{name}/k"], nd_w, scores, tensor=True, att=A))
    ex = lambda ctx, v: act.exp(ctx, v)
    ops.append(_Op(f"{name}/e", "unary", [f"{name}/d"], nd_w, lambda ctx, rows: [ex(ctx, v) for v in rows[0]],
                   f=ex, convex="exp"))
    Wz, bz = [], []
    for t in range(graph.tokens_of[src]):
        jp = A.seq_of[t][1]
        W = [[Fraction(0)] * nd_w for _ in range(nz)]
        for i in range(H):
            for k in A.keys[jp]:
                for l in A.keys[jp]:
                    if l != k:
                        W[A.key(i, k)][A.pair(i, k, l)] = Fraction(1)
        Wz.append(W)
        bz.append([Fraction(1)] * nz)
    ops.append(_row_affine_op(f"{name}/z", f"{name}/e", Wz, bz))

    def recip(ctx, v):
        try:
            return ctx.one / v
        except (Undecided, ZeroDivisionError):
            return TaylorContext.hull(ctx, flint.arb(0.5, 0.5)) if isinstance(ctx, TaylorContext) else ctx.one / v

    ops.append(_Op(f"{name}/w", "unary", [f"{name}/z"], nz, lambda ctx, rows: [recip(ctx, v) for v in rows[0]],
                   f=recip, lo=Fraction(1), convex="recip"))

    def mix(ctx, args):
        Wt, V = args
        out = []
        for t in range(len(Wt)):
            s, jp = A.seq_of[t]
            seq, row = A.seqs[s], []
            for i in range(H):
                ks = A.keys[jp]
                w = [Wt[t][A.key(i, k)] for k in ks]
                for a in range(i * A.dv, (i + 1) * A.dv):
                    row.append(gt.dot(ctx, w, [V[seq[k]][a] for k in ks]))
            out.append(row)
        return out

    ops.append(_Op(f"{name}/o", "mix", [f"{name}/w", f"{name}/v"], A.Ev, mix, tensor=True, att=A))
    out = _affine_op(name, f"{name}/o", p["Wo"], p.get("bo") or zeros(len(p["Wo"])))
    inner = out.forward

    def whole(ctx, args):
        try:
            return gr.node_tensor(ctx, nd, graph.numeric(ctx)[name], [args[0]])
        except (Undecided, ZeroDivisionError, ValueError):
            return [inner(ctx, [row]) for row in args[1]]

    out.forward, out.tensor, out.fin, out.cut, out.node = whole, True, (src, f"{name}/o"), True, nd
    ops.append(out)
    return ops


def _row_affine_op(name, src, Ws, bs):
    """``W_t x + b_t`` with its own exact ``W_t``, ``b_t`` for each row ``t`` (kind "rowaffine")."""
    ops = [_affine_op(name, src, W, b) for W, b in zip(Ws, bs)]

    def forward(ctx, args):
        return [o.forward(ctx, [row]) for o, row in zip(ops, args[0])]

    return _Op(name, "rowaffine", [src], len(Ws[0]), forward, tensor=True, W=[o.W for o in ops], b=[o.b for o in ops])


def _ops(graph) -> list:
    """The graph's nodes as :class:`_Op` (balls at the current precision)."""
    ops = []
    for nd in graph.nodes:
        win = graph.widths[nd.inputs[0]]
        row = lambda ctx, rows, nd=nd: gr.node_row(ctx, nd, graph.numeric(ctx)[nd.name], rows)
        p = nd.params
        if nd.op == "affine":
            ops.append(_affine_op(nd.name, nd.inputs[0], p["W"], p["b"], row))
        elif nd.op in gr.CONSTANT_OPS:
            cs = p["c"] if len(p["c"]) == win else p["c"] * win
            if nd.op == "add_constant":
                W, b = [[Fraction(int(i == j)) for j in range(win)] for i in range(win)], cs
            else:
                W = [[(c if nd.op == "mul_constant" else 1 / c) if i == j else Fraction(0) for j in range(win)]
                     for i, c in enumerate(cs)]
                b = [Fraction(0)] * win
            op = _affine_op(nd.name, nd.inputs[0], W, b, row)
            ops.append(op)
        elif nd.op == "add":
            ops.append(_Op(nd.name, "add", nd.inputs, win, row))
        elif nd.op in ("relu", "leaky_relu"):
            ops.append(_Op(nd.name, "relu", nd.inputs, win, row, alpha=p.get("alpha")))
        elif nd.op in _SMOOTH:
            f = lambda ctx, v, row=row: row(ctx, [[v]])[0]
            ops.append(_Op(nd.name, "unary", nd.inputs, win, row, f=f))
        elif nd.op in ("layer_norm", "rms_norm"):
            ops.extend(_norm_ops(nd, nd.inputs[0], win))
        elif nd.op == "attention" and not p.get("hardmax", False):
            ops.extend(_attention_ops(graph, nd, nd.inputs[0]))
        else:  # the operations that mix rows or take columns
            kind = {"slice": "slice", "concat": "concat", "select_tokens": "select", "mean_tokens": "mean"}.get(nd.op, "cut")
            whole = lambda ctx, args, nd=nd: gr.node_tensor(ctx, nd, graph.numeric(ctx)[nd.name], args)
            ops.append(_Op(nd.name, kind, nd.inputs, graph.widths[nd.name], whole, node=nd, tensor=True))
    return ops


def _tighter(b, o):
    """The meet of two bounds ``(lower, upper)`` of one entry (either alone where the other is None)."""
    if o is None:
        return b
    if b is None:
        return o
    return (o[0] if o[0] > b[0] else b[0], o[1] if o[1] < b[1] else b[1])


def _mccormick(lx, ux, ly, uy, mode: int):
    """McCormick's planes of ``x y`` for ``x`` in ``[lx, ux]``, ``y`` in ``[ly, uy]`` (exact balls),
    each ``(coefficient of x, of y, constant)``: below ``ly x + lx y - lx ly`` (``(x - lx)(y - ly)
    >= 0``) or ``uy x + ux y - ux uy``, above ``uy x + lx y - lx uy`` or ``ly x + ux y - ux ly``;
    the first pair in passes 0 and 2, the second in pass 1; and a ball of ``x y``'s range."""
    if mode != 1:
        lower, upper = (ly, lx, -(lx * ly)), (uy, lx, -(lx * uy))
    else:
        lower, upper = (uy, ux, -(ux * uy)), (ly, ux, -(ux * ly))
    return lower, upper, lx.union(ux) * ly.union(uy)


def _convex(kind: str, lo: flint.arb, hi: flint.arb) -> _Relaxation | None:
    """``exp`` or ``1/x`` (``lo > 0``) on ``[lo, hi]`` (exact ends), both convex: above, the line of
    slope ``s`` (the chord's, rounded) through the higher of ``f - s x`` at the two ends (a convex
    function minus a line is largest at an end); below, ``s x + min_x (f(x) - s x)`` over all ``x``
    (of the domain), in closed form: ``s - s log s`` for ``exp`` (at ``x = log s``, ``s > 0``),
    ``2 sqrt(-s)`` for ``1/x`` (at ``x = 1/sqrt(-s)``, ``s < 0``)."""
    f = (lambda x: x.exp()) if kind == "exp" else (lambda x: 1 / x)
    fl, fh = f(lo), f(hi)
    rng = fl.union(fh)
    if not (_finite(fl) and _finite(fh)):
        return None
    zero = flint.arb(0)
    if lo == hi:
        return _Relaxation(zero, fl.lower(), zero, fl.upper(), rng)
    s = ((fh - fl) / (hi - lo)).mid()
    t1, t2 = (fl - s * lo).upper(), (fh - s * hi).upper()
    bu = t1 if t1 >= t2 else t2
    if kind == "exp":
        if not s > 0:
            return _Relaxation(zero, fl.lower(), zero, fh.upper(), rng)
        bl = (s - s * s.log()).lower()
    else:
        if not s < 0:
            return _Relaxation(zero, fh.lower(), zero, fl.upper(), rng)
        bl = (2 * (-s).sqrt()).lower()
    return _Relaxation(s, bl, s, bu, rng)


class _Bounds:
    """Backward passes over one box: the Taylor models of every tensor (``vals``), the relaxations
    found so far (``relax``: per op, one per entry) and the ranges of the tensors (``ranges``)."""

    def __init__(self, graph, ops, ctx: TaylorContext, vals: dict):
        self.g, self.ops, self.ctx, self.vals = graph, ops, ctx, vals
        self.index = {op.name: i for i, op in enumerate(ops)}
        self.width = {op.name: op.width for op in ops} | {graph.input_name: graph.in_width}
        self.rows = {name: len(v) for name, v in vals.items()}
        self.relax: dict = {}
        self.ranges: dict = {}
        self.n = graph.input_count

    def range(self, name: str) -> list | None:
        """``[(lower, upper)]`` (exact balls) of every entry of tensor ``name``: its Taylor models'
        ranges met with the backward bounds through the ops before it (either alone where the
        other is not finite; None where neither is)."""
        if name in self.ranges:
            return self.ranges[name]
        tm = [v.range() for row in self.vals[name] for v in row]
        out = [(r.lower(), r.upper()) if _finite(r) else None for r in tm]
        if name != self.g.input_name:
            for e, b in enumerate(self.bounds(name, self.index[name] + 1)):
                if b is None:
                    continue
                if out[e] is None:
                    out[e] = b
                    continue
                lo = b[0] if b[0] > out[e][0] else out[e][0]
                hi = b[1] if b[1] < out[e][1] else out[e][1]
                if lo <= hi:  # else rounding alone: keep the Taylor range
                    out[e] = (lo, hi)
        out = self.capped(name, out)
        if any(e is None for e in out):
            out = None
        self.ranges[name] = out
        return out

    def capped(self, name: str, out: list) -> list:
        """The bounds ``out`` (``(lower, upper)`` or None per entry, row by row) of tensor ``name``,
        met with its a-priori balls where it is a norm's output (``cap`` of :func:`_norm_ops`; the
        cap alone where an entry has no bound, or, which a sound bound cannot, misses it)."""
        caps = self.ops[self.index[name]].cap if name in self.index else None
        if caps is None:
            return out
        w = self.width[name]
        out = list(out)
        for e, b in enumerate(out):
            clo, chi = caps[e % w].lower(), caps[e % w].upper()
            if b is None:
                out[e] = (clo, chi)
                continue
            lo = b[0] if b[0] > clo else clo
            hi = b[1] if b[1] < chi else chi
            out[e] = (lo, hi) if lo <= hi else (clo, chi)
        return out

    def _passes(self, upto: int) -> list:
        """The backward passes ``(mode, cut)`` through ops ``0 .. upto - 1``: the modes of
        :data:`MODES` where an undecided ReLU or a product lies before (else the first), each with
        the attention relaxed, and one more (mode 0) with every attention node and every norm's
        output entering as its Taylor model (``cut``) where there is one."""
        ops = self.ops[:upto]
        many = any(op.kind in ("bilinear", "scores", "mix") or any(r.through0 for r in self.relax.get(op.name, ()))
                   for op in ops)
        out = [(m, False) for m in (MODES if many else MODES[:1])]
        if any(op.cut for op in ops):
            out.append((MODES[0], True))
        return out

    def bounds(self, name: str, upto: int):
        """``[(lower, upper)]`` (exact balls, None where not finite) of every entry of ``name`` (row
        by row), ops ``0 .. upto - 1`` substituted, the best of the passes of :meth:`_passes`."""
        # a pass per row: objectives on one row (an op that mixes rows gives the other rows coefficients)
        groups = [[t] for t in range(self.rows[name])]
        return self._best(upto, lambda mode: [e for rows in groups for e in self._pass(name, upto, mode, rows)])

    def objective_bounds(self, rows: list):
        """``[(lower, upper)]`` (exact balls, None where not finite) of ``<c, Y>`` for each row ``c``
        of ``rows`` (exact rationals over the graph's outputs, row by row ``Y[t, j]``): one backward
        pass started from the objectives themselves, ``c`` and ``-c`` (each entry a ball holding
        the exact rational, so the start is rounded outward), the best of the passes of
        :meth:`_passes` (the attention relaxed, and taken as its Taylor model).  The outputs'
        correlation cancels in the pass, where combining the per-output bounds
        ``sum_j c_j [l_j, u_j]`` loses it (``y1 - y2`` with ``y1 = y2 + small``)."""
        name = self.g.output
        T, w = self.rows[name], self.width[name]
        K = 2 * len(rows)
        start = [None] * T
        for e, c in enumerate(rows):
            for i, a in enumerate(c):
                if a == 0:
                    continue
                t, j = divmod(i, w)
                if start[t] is None:
                    start[t] = flint.arb_mat(K, w)
                v = _start_entry(Fraction(a))
                start[t][2 * e, j] = v
                start[t][2 * e + 1, j] = -v
        if all(M is None for M in start):  # every objective is 0
            zero = flint.arb(0)
            return [(zero, zero) for _ in rows]
        return self._best(len(self.ops), lambda mode: self._pass(name, len(self.ops), mode, None, start))

    def _best(self, upto: int, run):
        """Entry by entry, the tightest of the passes ``run(mode)``, ``mode`` over
        :meth:`_passes` of op ``upto``."""
        best = None
        for mode in self._passes(upto):
            out = run(mode)
            best = out if best is None else [_tighter(b, o) for b, o in zip(best, out)]
        return best

    def _pass(self, name: str, upto: int, mode, tokens: list, start: list | None = None):
        """One backward pass ``mode`` (``(mode, cut)``): the bounds of the entries of ``name`` in
        rows ``tokens``; or, with ``start`` (one ``K x w`` ball matrix or None per row of
        ``name``, rows ``2e`` and ``2e + 1`` an objective ``c_e`` and ``-c_e``), the bounds of the
        objectives ``<c_e, Y>``."""
        T, w = self.rows[name], self.width[name]
        if start is None:
            K = 2 * len(tokens) * w
            lam = {name: [None] * T}
            for q, t in enumerate(tokens):
                M = flint.arb_mat(K, w)
                for j in range(w):
                    e = q * w + j
                    M[2 * e, j] = 1
                    M[2 * e + 1, j] = -1
                lam[name][t] = M
        else:
            K = next(M for M in start if M is not None).nrows()
            lam = {name: list(start)}
        ends = self._lower(lam, K, upto, mode)
        out = []
        for e in range(K // 2):
            lo, neg = ends[2 * e], ends[2 * e + 1]
            out.append(None if lo is None or neg is None else (lo, -neg))
        return out

    def _lower(self, lam: dict, K: int, upto: int, mode) -> list:
        """Lower bounds (exact balls, None where not finite) of the ``K`` objectives ``sum over
        tensors and rows of <lam[name][t][k], row t of name>``, ops ``0 .. upto - 1`` substituted
        backwards in pass ``mode`` (``(mode, cut)``)."""
        g = self.g
        self.mode, self.cut = mode
        self.const = flint.arb_mat(K, 1)
        self.coef = flint.arb_mat(K, self.n)
        for op in reversed(self.ops[:upto]):
            L = lam.pop(op.name, None)
            if L is not None and any(Lt is not None for Lt in L):
                self._op(op, L, lam, self.mode)
        const, coef = self.const, self.coef
        L = lam.pop(g.input_name, None)
        if L is not None:
            for t in range(len(L)):  # the input's rows
                if L[t] is None:
                    continue
                for k in range(K):
                    for j in range(g.in_width):
                        a = L[t][k, j]
                        i = t * g.in_width + j
                        const[k, 0] += a * self.ctx.x0[i]
                        coef[k, i] += a
        out = []
        for k in range(K):
            v = const[k, 0]
            for i in range(self.n):
                v += coef[k, i] * flint.arb(0, self.ctx.h[i].upper())
            out.append(v.lower() if _finite(v) else None)
        return out

    @staticmethod
    def _add(lam: dict, name: str, L: list):
        if name not in lam:
            lam[name] = L
            return
        lam[name] = [b if a is None else a if b is None else a + b for a, b in zip(lam[name], L)]

    def _op(self, op: _Op, L: list, lam: dict, mode: int):
        T = len(L)
        K = next(Lt for Lt in L if Lt is not None).nrows()
        const = self.const
        rows = [t for t in range(T) if L[t] is not None]
        kind = "cut" if op.cut and self.cut else op.kind
        if kind == "affine":
            for t in rows:
                const += L[t] * op.b
            self.const = const
            self._add(lam, op.inputs[0], [None if Lt is None else Lt * op.W for Lt in L])
        elif kind == "rowaffine":
            for t in rows:
                const += L[t] * op.b[t]
            self.const = const
            self._add(lam, op.inputs[0], [None if Lt is None else Lt * W for Lt, W in zip(L, op.W)])
        elif kind == "add":
            self._add(lam, op.inputs[0], L)
            self._add(lam, op.inputs[1], list(L))
        elif kind in ("unary", "relu"):
            rel = self.relax[op.name]
            w = op.width
            out = [None] * T
            for t in rows:
                M = flint.arb_mat(K, w)
                for j in range(w):
                    r = rel[t * w + j]
                    sl, bl, su, bu = r.lines(mode)
                    for k in range(K):
                        a = L[t][k, j]
                        if a == 0:
                            continue
                        m, rho = a.mid(), a.rad()
                        if rho != 0:  # the part of the coefficient off its midpoint: times f's range
                            const[k, 0] += flint.arb(0, rho) * r.rng
                        if m >= 0:
                            M[k, j] = m * sl
                            const[k, 0] += m * bl
                        else:
                            M[k, j] = m * su
                            const[k, 0] += m * bu
                out[t] = M
            self._add(lam, op.inputs[0], out)
        elif kind == "bilinear":
            self._bilinear(op, L, lam, mode)
        elif kind == "scores":
            self._scores(op, L, lam, mode)
        elif kind == "mix":
            self._mix(op, L, lam, mode)
        elif kind in ("slice", "concat", "select", "mean"):
            self._take(op, L, lam, rows)
        else:  # the Taylor model of the forward pass
            Y = self.vals[op.name]
            coef = self.coef
            for t in rows:
                for j in range(op.width):
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

    def _bilinear(self, op: _Op, L: list, lam: dict, mode: int):
        """``p_j = d_j s`` with ``d_j`` in ``[ld, ud]``, ``s`` in ``[ls, us]``: McCormick's planes,
        ``p >= ls d + ld s - ld ls`` or ``us d + ud s - ud us`` below, ``p <= us d + ld s - ld us``
        or ``ls d + ud s - ud ls`` above (each the product of two signed factors ``>= 0``); the
        first pair in passes 0 and 2, the second in pass 1."""
        T, w = len(L), op.width
        K = next(Lt for Lt in L if Lt is not None).nrows()
        const = self.const
        rd, rs = self.relax[op.name]
        Ld, Ls = [None] * T, [None] * T
        for t in range(T):
            if L[t] is None:
                continue
            Md, Ms = flint.arb_mat(K, w), flint.arb_mat(K, 1)
            ls, us = rs[t]
            for j in range(w):
                ld, ud = rd[t * w + j]
                prng = (ld.union(ud)) * (ls.union(us))
                lower = (ls, ld, -(ld * ls)) if mode != 1 else (us, ud, -(ud * us))
                upper = (us, ld, -(ld * us)) if mode != 1 else (ls, ud, -(ud * ls))
                for k in range(K):
                    a = L[t][k, j]
                    if a == 0:
                        continue
                    m, rho = a.mid(), a.rad()
                    if rho != 0:
                        const[k, 0] += flint.arb(0, rho) * prng
                    al, be, ga = lower if m >= 0 else upper
                    Md[k, j] = m * al
                    Ms[k, 0] += m * be
                    const[k, 0] += m * ga
            Ld[t], Ls[t] = Md, Ms
        self._add(lam, op.inputs[0], Ld)
        self._add(lam, op.inputs[1], Ls)

    def _take(self, op: _Op, L: list, lam: dict, rows: list):
        """The linear token and column operations, substituted exactly: ``slice`` and ``concat``
        move coefficients between columns, ``select_tokens`` between rows, ``mean_tokens`` spreads
        a sequence's coefficient over its rows times ``1/L``."""
        p = op.node.params
        if op.kind in ("slice", "concat"):
            offsets, start = [], p.get("start", 0)
            for i in op.inputs:
                offsets.append(start)
                start += self.width[i] if op.kind == "concat" else 0
            for i, off in zip(op.inputs, offsets):
                wi = self.width[i]
                S = flint.arb_mat(op.width, wi)
                if op.kind == "slice":
                    for j in range(op.width):
                        S[j, off + j] = 1
                else:
                    for j in range(wi):
                        S[off + j, j] = 1
                self._add(lam, i, [None if Lt is None else Lt * S for Lt in L])
            return
        src = op.inputs[0]
        out = [None] * self.rows[src]
        if op.kind == "select":
            for q in rows:
                t = p["indices"][q]
                out[t] = L[q] if out[t] is None else out[t] + L[q]
        else:
            n = self.rows[src]
            Ls = p.get("sequence_length") or n
            inv = flint.arb(1) / Ls
            for s, seq in enumerate(gt.sequences(n, Ls, p.get("layout", "batch_major"))):
                if L[s] is None:
                    continue
                for t in seq:
                    out[t] = L[s] * inv if out[t] is None else out[t] + L[s] * inv
        self._add(lam, src, out)

    def _scores(self, op: _Op, L: list, lam: dict, mode: int):
        """``d_jkl = scale sum_a q_ja (k_la - k_ka)`` (see :func:`_attention_ops`): each product
        by :func:`_mccormick` with the ranges of ``q_ja`` and of the key difference; the
        coefficient of the difference goes to row ``l`` of the keys and, negated, to row ``k``."""
        A = op.att
        rq, kd = self.relax[op.name]
        K = next(Lt for Lt in L if Lt is not None).nrows()
        const = self.const
        sc = A.scale_ball()
        Eq = A.Eq
        Lq, Lk = [None] * len(L), [None] * self.rows[op.inputs[1]]
        for t in range(len(L)):
            if L[t] is None:
                continue
            s, jp = A.seq_of[t]
            seq = A.seqs[s]
            Mq = flint.arb_mat(K, Eq)
            for i in range(A.H):
                for k in A.keys[jp]:
                    for l in A.keys[jp]:
                        if l == k:
                            continue
                        col = A.pair(i, k, l)
                        cs = []
                        for r in range(K):
                            a = L[t][r, col]
                            if not a == 0:  # a ball around 0 is not skipped
                                cs.append((r, a * sc))
                        if not cs:
                            continue
                        for kr in (seq[k], seq[l]):
                            if Lk[kr] is None:
                                Lk[kr] = flint.arb_mat(K, Eq)
                        Ml, Mk = Lk[seq[l]], Lk[seq[k]]
                        for a in range(i * A.dk, (i + 1) * A.dk):
                            lx, ux = rq[t * Eq + a]
                            ly, uy = kd[(s, k, l, a)]
                            lower, upper, prng = _mccormick(lx, ux, ly, uy, mode)
                            for r, c in cs:
                                m, rho = c.mid(), c.rad()
                                if rho != 0:
                                    const[r, 0] += flint.arb(0, rho) * prng
                                al, be, ga = lower if m >= 0 else upper
                                Mq[r, a] += m * al
                                Ml[r, a] += m * be
                                Mk[r, a] -= m * be
                                const[r, 0] += m * ga
            Lq[t] = Mq
        self._add(lam, op.inputs[0], Lq)
        self._add(lam, op.inputs[1], Lk)

    def _mix(self, op: _Op, L: list, lam: dict, mode: int):
        """``o_j,a = sum_k w_jk v_(k,a)`` (head ``i`` of column ``a``): each product by
        :func:`_mccormick` with the ranges of the weight (met with ``[0, 1]``) and of the value."""
        A = op.att
        rw, rv = self.relax[op.name]
        K = next(Lt for Lt in L if Lt is not None).nrows()
        const = self.const
        nz, Ev = A.H * A.L, A.Ev
        Lw, Lv = [None] * len(L), [None] * self.rows[op.inputs[1]]
        for t in range(len(L)):
            if L[t] is None:
                continue
            s, jp = A.seq_of[t]
            seq = A.seqs[s]
            Mw = flint.arb_mat(K, nz)
            for kk in A.keys[jp]:
                if Lv[seq[kk]] is None:
                    Lv[seq[kk]] = flint.arb_mat(K, Ev)
            for i in range(A.H):
                for a in range(i * A.dv, (i + 1) * A.dv):
                    cs = []
                    for r in range(K):
                        c = L[t][r, a]
                        if not c == 0:  # a ball around 0 is not skipped
                            cs.append((r, c))
                    if not cs:
                        continue
                    for kk in A.keys[jp]:
                        wc, vr = A.key(i, kk), seq[kk]
                        lx, ux = rw[t * nz + wc]
                        ly, uy = rv[vr * Ev + a]
                        lower, upper, prng = _mccormick(lx, ux, ly, uy, mode)
                        Mv = Lv[vr]
                        for r, c in cs:
                            m, rho = c.mid(), c.rad()
                            if rho != 0:
                                const[r, 0] += flint.arb(0, rho) * prng
                            al, be, ga = lower if m >= 0 else upper
                            Mw[r, wc] += m * al
                            Mv[r, a] += m * be
                            const[r, 0] += m * ga
            Lw[t] = Mw
        self._add(lam, op.inputs[0], Lw)
        self._add(lam, op.inputs[1], Lv)

    def _key_differences(self, kname: str, A: _Att) -> dict | None:
        """``{(s, k, l, a): (lower, upper)}``: the range of ``k_(l,a) - k_(k,a)`` (rows ``l``, ``k`` of
        sequence ``s`` of the keys), its model's range met with its own backward bounds (one
        objective per pair of positions some query attends together, per column, both signs)."""
        upto = self.index[kname] + 1
        Eq, T = A.Eq, self.rows[kname]
        vals = self.vals[kname]
        together = {(k, l) for ks in A.keys for k in ks for l in ks if k < l}
        out = {}
        for s, seq in enumerate(A.seqs):
            pairs = sorted(together)
            if not pairs:
                continue
            K = 2 * len(pairs) * Eq
            best = None
            for mode in self._passes(upto):
                M = {t: flint.arb_mat(K, Eq) for t in seq}
                for q, (k, l) in enumerate(pairs):
                    for a in range(Eq):
                        e = q * Eq + a
                        M[seq[l]][2 * e, a] = 1
                        M[seq[l]][2 * e + 1, a] = -1
                        M[seq[k]][2 * e, a] = -1
                        M[seq[k]][2 * e + 1, a] = 1
                lam = {kname: [M.get(t) for t in range(T)]}
                ends = self._lower(lam, K, upto, mode)
                got = [None if ends[2 * e] is None or ends[2 * e + 1] is None else (ends[2 * e], -ends[2 * e + 1])
                       for e in range(K // 2)]
                best = got if best is None else [_tighter(b, o) for b, o in zip(best, got)]
            for q, (k, l) in enumerate(pairs):
                for a in range(Eq):
                    r = (vals[seq[l]][a] - vals[seq[k]][a]).range()
                    tm = (r.lower(), r.upper()) if _finite(r) else None
                    b = best[q * Eq + a]
                    e = _tighter(tm, b) if tm is not None else b
                    if e is None:
                        return None
                    if e[0] > e[1]:  # rounding alone: keep the model's
                        e = tm
                    out[(s, k, l, a)] = e
                    out[(s, l, k, a)] = (-e[1], -e[0])
        return out

    # --- the relaxations, in forward order ---------------------------------------------------
    def relax_op(self, op: _Op, prec: int) -> bool:
        """Find ``op``'s relaxation (False where a range is not finite)."""
        if op.kind == "scores":
            rq = self.range(op.inputs[0])
            kd = self._key_differences(op.inputs[1], op.att)
            if rq is None or kd is None:
                return False
            self.relax[op.name] = (rq, kd)
            return True
        if op.kind == "mix":
            rw, rv = self.range(op.inputs[0]), self.range(op.inputs[1])
            if rw is None or rv is None:
                return False
            zero, one = flint.arb(0), flint.arb(1)
            unit = []
            for lo, hi in rw:  # a softmax weight lies in [0, 1]
                lo, hi = (lo if lo > zero else zero), (hi if hi < one else one)
                unit.append((lo, hi) if lo <= hi else (zero, one))
            self.relax[op.name] = (unit, rv)
            return True
        if op.kind == "bilinear":
            rd, rs = self.range(op.inputs[0]), self.range(op.inputs[1])
            if rd is None or rs is None:
                return False
            self.relax[op.name] = (rd, rs)
            return True
        rng = self.range(op.inputs[0])
        if rng is None:
            return False
        rel = []
        for lo, hi in rng:
            if op.lo is not None:  # the input is >= lo by construction (a variance plus eps)
                lo_q = _q(op.lo).lower()  # exact, at most lo
                lo = lo_q if lo < lo_q else lo
                hi = lo if hi < lo else hi
            if op.convex is not None:
                r = _convex(op.convex, lo, hi)
                if r is None:
                    return False
                rel.append(r)
            elif op.kind == "relu":
                alpha = None if op.alpha is None else flint.fmpq(op.alpha.numerator, op.alpha.denominator)
                rel.append(_piecewise_linear("relu" if alpha is None else "leaky_relu", alpha, lo, hi))
            else:
                r = _smooth(op.f, lo, hi, prec)
                if r is None:
                    return False
                rel.append(r)
        self.relax[op.name] = rel
        return True


def _forward(graph, ops, ctx: TaylorContext) -> dict:
    """Every tensor (of every op) as rows of Taylor models over the context's box."""
    xs = ctx.inputs()
    w = graph.in_width
    vals = {graph.input_name: [xs[t * w:(t + 1) * w] for t in range(graph.tokens)]}
    for op in ops:
        args = [vals[i] for i in (op.fin or op.inputs)]
        rows = op.forward(ctx, args) if op.tensor else [op.forward(ctx, [a[t] for a in args]) for t in range(len(args[0]))]
        vals[op.name] = [[ctx.convert(v) for v in row] for row in rows]
    return vals


def linear_graph_bounds(graph, centre, half, prec: int = 128):
    """``[(lower, upper)]`` (exact balls, the outputs row by row) of the graph over the box
    ``centre +- half``, or None where a bound is not finite (see the module docstring)."""
    return _run(graph, centre, half, prec, None)[0]


def linear_graph_objective_bounds(graph, centre, half, rows: list, prec: int = 128):
    """``(outputs, objectives)`` over the box ``centre +- half``: the bounds of
    :func:`linear_graph_bounds`, and ``[(lower, upper)]`` (exact balls) of ``<c, Y>`` for each row
    ``c`` of ``rows`` (exact rationals, one per output, row by row), the backward pass started
    from ``c`` itself (:meth:`_Bounds.objective_bounds`); either is None where a bound is not
    finite.  The relaxations are found once for both."""
    return _run(graph, centre, half, prec, rows)


def _run(graph, centre, half, prec: int, rows):
    ctx = TaylorContext(prec, centre, half)
    with ctx.scope():
        ops = _ops(graph)
        try:
            vals = _forward(graph, ops, ctx)
        except (ZeroDivisionError, ValueError, TypeError):
            return None, None
        b = _Bounds(graph, ops, ctx, vals)
        for op in ops:
            if op.kind in ("unary", "relu", "bilinear", "scores", "mix") and not b.relax_op(op, prec):
                return None, None
        out = b.capped(graph.output, b.bounds(graph.output, len(ops)))
        objs = b.objective_bounds(rows) if rows else None
    out = None if any(e is None for e in out) else out
    objs = None if objs is None or any(e is None for e in objs) else objs
    return out, objs
