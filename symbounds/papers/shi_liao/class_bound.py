"""The error bound of [SL26]'s network for every target of a Hölder class, box by box.

For the network of docs/shi_liao.md ("The network") the layer-2 scores at column 1 do not depend
on the target: ``s_k(x) = iota * T~_k(x)`` is affine in ``x`` (layer 1's attention reads the
positions only), and the target enters through the layer-1 values ``v_h = g(c_h)`` alone.  With
``beta~ = softmax(s)``, the layer-1 weights ``pi^(h)_{k1}`` and the feed-forward scale
``Lambda_g`` of the value row, ``T_g(x) = sum_k beta~_k(x) g~_k`` with
``g~_k = Lambda_g sum_h pi^(h)_{k1} g(c_h) = g(c_k) + delta_k`` and

    |delta_k| <= B l_k,   l_k = |Lambda_g pi^(k)_{k1} - 1| + sum_{h != k} Lambda_g pi^(h)_{k1}.

Hence for every ``g`` with ``|g| <= B`` and ``|g(x) - g(y)| <= C_H |x - y|^alpha``

    |T_g(x) - g(x)| <= E(x) = sum_k beta~_k(x) [min(C_H |x - c_k|^alpha, 2B) + B l_k],

and the target ``g_0(y) = min(C_H |y - x_0|^alpha, 2B) - B`` of the class has
``T_{g_0}(x_0) - g_0(x_0) >= E(x_0) - 2B sum_k beta~_k(x_0) l_k`` (docs/shi_liao.md, "Every target
of the class").  This module reads ``s`` and ``l`` from a model file of the construction
(:func:`class_network`), encloses ``E`` over a box (:func:`box_upper`), evaluates it at a point
(:func:`point_values`) and searches the cube for ``sup E`` (:func:`search`, the best-first search
of :mod:`symbounds.core.search` over the problem :class:`ClassProblem`).

Box bound.  On a box ``X`` let ``l*`` be the token with the largest score at the centre.  A token
whose score is provably below ``s_l* - NEAR_LOG`` on the whole box is *far*: the far tokens' total
weight is at most ``sum_far exp(max_X(s_k - s_l*))``.  For a *near* token,
``beta~_k <= 1 / sum_{l in near} exp(min_X(s_l - s_k))``: each difference is affine in ``x``; for the
``DENOMINATOR`` tokens ``l`` of largest score at the centre its minimum is exact up to rounding, for
the others it is bounded below through the top token's slopes,
``min_X(s_l - s_k) >= s_l(x_c) - s_k(x_c) - sum_i (|A_li - A_l*i| + |A_ki - A_l*i|) h_i`` (the centre
``x_c``, the half-widths ``h``), which makes their part one sum per box.  With ``A_k`` the largest bracket on the box (from
the largest distance from ``X`` to ``c_k``, exact in rationals), ``sum_k beta~_k a_k`` is at most
the greedy optimum of ``sum_i w_i A_i`` over ``0 <= w_i <= cap_i``, ``sum_i w_i <= 1`` (the near
tokens, and one far item worth ``2B + B max_k l_k``).  Every step is rigorous whichever tokens are
called near; the split only decides how tight the bound is.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np

from ...core.boxes import Box, round_up_record
from ...core.claims import Verdict
from ...core.contexts import BallContext
from ...core.exact import arb_to_fraction, as_fraction
from ...core.search import Enclosure, Limits, Problem
from ...core.search import search as box_search
from ...core.transformer import Attention, FeedForward, forward
from .constants import ROWS

__all__ = ["ClassNetwork", "ClassOptions", "ClassResult", "ClassEvaluator", "ClassProblem", "box_upper",
           "class_network", "point_values", "search", "weight_caps", "worst_target"]

#: Tokens whose weight is provably below ``e^-NEAR_LOG`` of the top token's on a box are "far".
NEAR_LOG = 40
#: A near token's cap uses this many terms of its softmax denominator exactly (the heaviest at the
#: centre); the other near tokens enter through one sum per box (:func:`box_upper`).
DENOMINATOR = 8


@dataclass
class ClassNetwork:
    """What the class bound reads off the network: the affine layer-2 scores
    ``s_k(x) = b_k + sum_i A[k][i] x_i`` (balls), the leakage factors ``l_k`` (balls), the centres
    and the class ``(alpha, C_H, B)`` (exact)."""

    d: int
    centres: list  # [tuple of Fractions]
    alpha: Fraction
    C_H: Fraction
    B: Fraction
    b: list
    A: list
    ell: list
    prec: int
    ell_max: Fraction = Fraction(0)
    b_mid: list = field(default_factory=list)
    A_mid: list = field(default_factory=list)


def class_network(model, d: int, centres, alpha, C_H, B, prec: int = 256) -> ClassNetwork:
    """Read the layer-2 scores and the leakage factors of the construction's network ``model``
    (a :class:`~symbounds.core.transformer.Transformer` of docs/shi_liao.md, "The network") in Arb
    balls at ``prec`` bits.  ``ValueError`` if the model does not have the construction's shape."""
    L = model.layers
    if (len(L) != 4 or not isinstance(L[2], Attention) or len(L[2].heads) != 1 or L[2].kind != "softmax"
            or not isinstance(L[3], FeedForward) or model.affine_prefix() != 2):
        raise ValueError("the class bound needs the two-block network of [SL26] (affine first block, one "
                         "softmax head in layer 2)")
    P = len(centres)
    R = ROWS(d)
    col = model.readout.column
    head = L[2].heads[0]
    dep = model.structure().prefix_dependence  # which entries of the state after the affine prefix depend on x
    if any(v != 0 and dep[r][col] for qrow in head.W_Q for r, v in enumerate(qrow)):
        raise ValueError("the layer-2 query depends on the input: the scores are not affine")
    ball = BallContext(prec)
    num = model.numeric(ball)
    with ball.scope():
        Z0, tr = forward(ball, model, [0] * d, trace=True, stop=2)
        Zs = [forward(ball, model, [1 if j == i else 0 for j in range(d)], stop=2) for i in range(d)]
        tau = num.layers[2].tau
        WQ, WK = num.layers[2].heads[0].W_Q, num.layers[2].heads[0].W_K
        q = [sum((w * Z0[r][col] for r, w in enumerate(row) if w != 0), flint.arb(0)) for row in WQ]

        def scores(Z):
            out = []
            for k in range(P):
                s = flint.arb(0)
                for a, row in enumerate(WK):
                    s += q[a] * sum((w * Z[r][k] for r, w in enumerate(row) if w != 0), flint.arb(0))
                out.append(s if tau is None else s / tau)
            return out

        b = scores(Z0)
        Ai = [scores(Z) for Z in Zs]
        A = [[Ai[i][k] - b[k] for i in range(d)] for k in range(P)]
        pis = tr.attention[0]
        lam_g = num.layers[1].W2[R["g"]][R["g"]]
        ell = []
        for k in range(P):
            own = abs(lam_g * pis[k][k][0] - 1)
            off = sum((lam_g * pis[h][k][0] for h in range(P) if h != k), flint.arb(0))
            ell.append(own + off)
        ell_max = max(arb_to_fraction(e.upper()) for e in ell)
    net = ClassNetwork(d, [tuple(as_fraction(v) for v in c) for c in centres], Fraction(alpha), Fraction(C_H),
                       Fraction(B), b, A, ell, prec, ell_max)
    net.b_mid = [float(v.mid()) for v in b]
    net.A_mid = [[float(v.mid()) for v in row] for row in A]
    return net


def _bracket_upper(net: ClassNetwork, dist2: Fraction) -> flint.arb:
    """An arb containing ``min(C_H dist^alpha, 2B)`` for the exact squared distance ``dist2``."""
    if dist2 == 0:
        return flint.arb(0)
    d2 = _arb(dist2)
    r = d2.sqrt() if net.alpha == 1 else d2 ** (_arb(net.alpha) / 2)
    v = _arb(net.C_H) * r
    two_b = _arb(2 * net.B)
    if v < two_b:
        return v
    if v >= two_b:
        return two_b
    return _min_ball(v, two_b)


def _min_ball(a: flint.arb, b: flint.arb) -> flint.arb:
    """A ball containing ``min(a, b)``: the hull of the ends' minima."""
    lo = min(arb_to_fraction(a.lower()), arb_to_fraction(b.lower()))
    hi = min(arb_to_fraction(a.upper()), arb_to_fraction(b.upper()))
    return _arb(lo).union(_arb(hi))


def _arb(q) -> flint.arb:
    """The ball of an exact rational (exact when the precision holds it)."""
    q = Fraction(q)
    return flint.arb(flint.fmpq(q.numerator, q.denominator))


def _interval(lo: Fraction, hi: Fraction) -> flint.arb:
    return _arb(lo).union(_arb(hi))


def weight_caps(net: ClassNetwork, box: Box) -> tuple[dict, Fraction]:
    """``(caps, far)``: for each near token ``k`` an exact ``cap_k >= max_X beta~_k``, and an exact
    upper bound ``far`` of the far tokens' total weight on ``box`` (see the module docstring)."""
    d, P = net.d, len(net.centres)
    ctx = BallContext(net.prec)
    with ctx.scope():
        X = [_interval(box.lo[i], box.hi[i]) for i in range(d)]
        xc = [float((box.lo[i] + box.hi[i]) / 2) for i in range(d)]
        sc = [net.b_mid[k] + sum(net.A_mid[k][i] * xc[i] for i in range(d)) for k in range(P)]
        top = max(range(P), key=sc.__getitem__)

        def diff(k, l):  # s_k - s_l over the box, as one affine function
            v = net.b[k] - net.b[l]
            for i in range(d):
                v += (net.A[k][i] - net.A[l][i]) * X[i]
            return v

        near, far_mass = [], flint.arb(0)
        for k in range(P):
            if k == top:
                near.append(k)
                continue
            t = diff(k, top)
            if t.upper() < -NEAR_LOG:
                far_mass += t.upper().exp()
            else:
                near.append(k)
        # The denominators: the DENOMINATOR heaviest tokens at the centre H (the top l* among them)
        # with their exact affine minima, and every other near token through one sum per box:
        # with the centre xc, the half-widths h and a = A_l*, min_X (s_l - s_k) >= u_l - (s_k(xc) +
        # rho_k), where u_l = s_l(xc) - rho_l and rho_l = sum_i |A_li - a_i| h_i.  (The heaviest
        # alone do not converge to beta~_k when the weight is spread over more tokens, at a small
        # M_g.)  Dropping or lowering terms only makes each cap larger, never wrong.
        heavy = sorted(near, key=sc.__getitem__, reverse=True)[:DENOMINATOR]
        in_heavy = set(heavy)
        rest_tokens = [l for l in near if l not in in_heavy]
        if rest_tokens:
            hw = [_arb((box.hi[i] - box.lo[i]) / 2) for i in range(d)]
            xm = [_arb((box.lo[i] + box.hi[i]) / 2) for i in range(d)]
            a = net.A[top]
            at_c = {k: net.b[k] + sum((net.A[k][i] * xm[i] for i in range(d)), flint.arb(0)) for k in near}
            rho = {k: sum((abs(net.A[k][i] - a[i]) * hw[i] for i in range(d)), flint.arb(0)) for k in near}
            ref = at_c[top].mid()
            term = {l: (at_c[l] - rho[l] - ref).exp() for l in rest_tokens}  # e^(u_l - ref)
            rest_lo = sum((t.lower() for t in term.values()), flint.arb(0))
        caps = {}
        for k in near:
            den = flint.arb(1)
            for l in heavy:
                if l != k:
                    den += diff(l, k).lower().exp().lower()
            if rest_tokens:
                rest = (rest_lo - term[k].upper() if k in term else rest_lo).lower()
                if rest > 0:
                    den += ((ref - at_c[k] - rho[k]).exp().lower() * rest).lower()
            caps[k] = min(Fraction(1), arb_to_fraction((1 / den).upper()))
        return caps, arb_to_fraction(far_mass.upper())


def box_upper(net: ClassNetwork, box: Box) -> Fraction:
    """An exact upper bound of ``E`` over ``box`` (see the module docstring)."""
    d, P = net.d, len(net.centres)
    caps, far = weight_caps(net, box)
    items = []
    with BallContext(net.prec).scope():
        for k, cap in caps.items():
            far2 = Fraction(0)
            for i in range(d):
                c = net.centres[k][i]
                far2 += max(abs(box.lo[i] - c), abs(box.hi[i] - c)) ** 2
            val = _bracket_upper(net, far2) + _arb(net.B) * net.ell[k]
            items.append((arb_to_fraction(val.upper()), cap))
    if len(caps) < P:
        items.append((2 * net.B + net.B * net.ell_max, far))
    items.sort(key=lambda t: t[0], reverse=True)
    left, total = Fraction(1), Fraction(0)
    for value, cap in items:
        w = min(cap, left)
        total += w * value
        left -= w
        if left <= 0:
            break
    return total


def point_values(net: ClassNetwork, x) -> tuple[flint.arb, flint.arb]:
    """``(E(x), 2B sum_k beta~_k(x) l_k)`` as balls at the exact point ``x``: the class bound and the
    leakage part of it, so ``E - leak`` is the lower bound of the worst target ``g_0`` at ``x``."""
    d, P = net.d, len(net.centres)
    x = [Fraction(v) for v in x]
    ctx = BallContext(net.prec)
    with ctx.scope():
        xs = [_arb(v) for v in x]
        s = [net.b[k] + sum((net.A[k][i] * xs[i] for i in range(d)), flint.arb(0)) for k in range(P)]
        m = max(v.mid() for v in s)
        e = [(v - m).exp() for v in s]
        tot = sum(e, flint.arb(0))
        E, leak = flint.arb(0), flint.arb(0)
        for k in range(P):
            w = e[k] / tot
            dist2 = sum(((x[i] - net.centres[k][i]) ** 2 for i in range(d)), Fraction(0))
            E += w * (_bracket_upper(net, dist2) + _arb(net.B) * net.ell[k])
            leak += w * net.ell[k]
        leak = _arb(2 * net.B) * leak
    return E, leak


def worst_target(x0, alpha, C_H, B) -> str:
    """``g_0(y) = min(C_H |y - x_0|^alpha, 2B) - B`` in the target grammar of ``certify --target``."""
    q = lambda v: f"({Fraction(v)})"
    d = len(x0)
    if d == 1:
        dist = f"abs(x1 - {q(x0[0])})"
    else:
        dist = "sqrt(" + " + ".join(f"(x{i + 1} - {q(v)})^2" for i, v in enumerate(x0)) + ")"
    if Fraction(alpha) != 1:
        dist = f"({dist})^{q(alpha)}"
    return f"min({q(C_H)}*{dist}, {q(2 * Fraction(B))}) - {q(B)}"


@dataclass
class ClassOptions:
    initial: int | None = None  # boxes per axis to start with (default by dimension)
    min_width: Fraction = Fraction(1, 2**24)
    max_boxes: int = 100_000
    #: stop refining when the upper end is within this share of the lower end (default: 1/1000 for
    #: d = 1, 1/20 above, where the boxes near the worst points grow as (1/rtol)^(d-1))
    rtol: Fraction | None = None
    prec: int = 256
    model_prec: int = 192
    timeout: float | None = None  # seconds of wall clock: then undecided, with the boxes so far


@dataclass
class ClassResult:
    verdict: Verdict  # proved / refuted / undecided
    boxes: list  # [(Box, Fraction upper bound of E)] covering the cube
    max_bound: Fraction  # sup E <= max_bound
    worst_x: tuple  # the box centre with the largest lower bound
    worst_E: flint.arb  # E(worst_x)
    worst_leak: flint.arb  # 2B sum beta~ l at worst_x
    worst_lower: Fraction  # |T_g0(x*) - g0(x*)| >= worst_lower
    seconds: float
    evaluated: int
    undecided: list = field(default_factory=list)
    #: why the search ended before every box was decided: None, "timeout", "max-boxes",
    #: "min-width", or "leakage" (E itself exceeds eps at a point where the worst target does not)
    stopped: str | None = None


class ClassEvaluator:
    """The evaluator of :func:`symbounds.core.search.search` for ``E``: a box's enclosure is
    ``[0, box_upper]`` (``E >= 0``), the box's **own** bound, never met with its parent's, since
    ``check`` re-derives every recorded bound from its box alone; a point's values are
    ``(E - leak, E)`` as balls (:func:`point_values`, cached: the search reads them twice)."""

    batch = 1  # one box halved per step, the one of largest bound
    descent = (0, 0)

    def __init__(self, net: ClassNetwork):
        self.net = net
        self.prec = net.prec
        self.counts: dict = {}
        self._points: dict = {}

    def enclose(self, boxes: list, parents: list | None = None, deadline=None) -> list:
        self.counts["class"] = self.counts.get("class", 0) + len(boxes)
        return [Enclosure((Fraction(0),), (box_upper(self.net, b),), "class") for b in boxes]

    def point(self, x) -> tuple:
        """``(E, leak, lower)`` at the exact point ``x``: ``lower`` is the exact lower end of
        ``E - leak``, the worst target's certified error there."""
        x = tuple(x)
        if x not in self._points:
            E, leak = point_values(self.net, x)
            with BallContext(self.net.prec).scope():
                self._points[x] = (E, leak, arb_to_fraction((E - leak).lower()))
        return self._points[x]

    def sample(self, points: list) -> np.ndarray:
        """``(P, 2)``: the lower ends of ``E - leak`` and of ``E`` at the points, as floats."""
        rows = []
        for x in points:
            E, _, lower = self.point(x)
            rows.append((float(lower), float(arb_to_fraction(E.lower()))))
        return np.array(rows, dtype=float).reshape(-1, 2)

    def at(self, x, prec: int | None = None) -> Enclosure:
        E, leak, lower = self.point(x)
        with BallContext(self.net.prec).scope():
            upper = arb_to_fraction((E - leak).upper())
        return Enclosure((lower, arb_to_fraction(E.lower())), (upper, arb_to_fraction(E.upper())), "ball",
                         None, [E, leak])


class ClassProblem(Problem):
    """``sup_x E(x) <= eps`` as a problem of :func:`symbounds.core.search.search`.

    A box is decided (nothing left to refine) when its bound ``U`` is at most ``eps`` and within
    ``rtol`` of the best lower bound found, ``U <= best (1 + rtol)``; boxes of the largest ``U``
    are halved first.  Every box centre is evaluated rigorously; a centre where ``E - leak``
    exceeds ``eps`` refutes the claim (the worst target ``g_0`` there is a counterexample of the
    class), and one where ``E`` itself exceeds ``eps`` while ``E - leak`` does not ends the
    search undecided (``stop``: the leakage part of ``E`` is too large for either side)."""

    falsify = False  # the centres of the starting grid and of every new box are the samples

    def __init__(self, ev: ClassEvaluator, eps: Fraction, rtol: Fraction):
        self.ev, self.eps, self.rtol = ev, Fraction(eps), Fraction(rtol)
        self.best = (Fraction(-1), None, None, None)  # (lower, x, E, leak), the largest lower seen
        self.E_above = False

    def decide(self, box, enc) -> Verdict:
        U = enc.hi[0]
        ok = U <= self.eps and U <= self.best[0] * (1 + self.rtol)
        return Verdict.PROVED if ok else Verdict.UNDECIDED

    def priority(self, box, enc) -> float:
        return -float(enc.hi[0])

    def observe(self, points, ys) -> None:
        for x in points:
            E, leak, lower = self.ev.point(x)
            if lower > self.best[0]:
                self.best = (lower, tuple(x), E, leak)
            if not self.E_above and arb_to_fraction(E.lower()) > self.eps:
                self.E_above = True

    def score(self, ys) -> np.ndarray:
        return float(self.eps) - ys[:, 0] if len(ys) else np.zeros(0)

    def refutes(self, x, enc) -> dict | None:
        return {"x": [str(v) for v in x], "lower": str(enc.lo[0])} if enc.lo[0] > self.eps else None

    def objectives(self) -> list:
        return []

    def stop(self) -> str | None:
        return "leakage" if self.E_above else None


def search(net: ClassNetwork, eps: Fraction, opts: ClassOptions, progress=None) -> ClassResult:
    """Branch and bound for ``sup_{x in [0,1]^d} E(x)`` (:class:`ClassProblem` run by
    :func:`symbounds.core.search.search`, from a grid of ``initial`` boxes per axis): boxes with
    the largest upper bound are halved (widest side) until the largest upper bound is at most
    ``eps`` and within ``rtol`` of the best lower bound found at a box centre (``E - leak``, the
    worst target's certified error), or a lower bound exceeds ``eps`` (refuted: the worst target
    at that centre is a counterexample of the class), or ``E`` itself exceeds ``eps`` at a centre
    while the lower bound does not (undecided: the leakage part of ``E`` is too large for either
    side), or ``max_boxes`` boxes were evaluated, or ``timeout`` seconds passed (undecided, with
    the boxes so far).  Verdict proved when every box's bound is at most ``eps``.
    ``progress(evaluated)`` is called after each step."""
    d = net.d
    n0 = opts.initial or {1: 64, 2: 16}.get(d, 4)
    rtol = opts.rtol if opts.rtol is not None else (Fraction(1, 1000) if d == 1 else Fraction(1, 20))
    eps = Fraction(eps)
    edges = [Fraction(i, n0) for i in range(n0 + 1)]
    grid = [Box(tuple(edges[i] for i in idx), tuple(edges[i + 1] for i in idx))
            for idx in itertools.product(range(n0), repeat=d)]
    ev = ClassEvaluator(net)
    problem = ClassProblem(ev, eps, rtol)
    cube = Box((Fraction(0),) * d, (Fraction(1),) * d)
    limits = Limits(max_boxes=opts.max_boxes, timeout=opts.timeout, min_width=opts.min_width)
    res = box_search(problem, ev, cube, limits, None if progress is None else (lambda _, n: progress(n)), grid)
    boxes = [(b, e.hi[0]) for b, e in res.decided + res.open]
    max_bound = max(u for _, u in boxes)
    undecided = [b for b, u in boxes if u > eps]
    if res.verdict is Verdict.REFUTED:
        verdict = Verdict.REFUTED
    elif undecided:
        verdict = Verdict.UNDECIDED
    else:
        verdict = Verdict.PROVED
    boxes = [(b, min(round_up_record(u), eps) if u <= eps else u) for b, u in boxes]
    boxes.sort(key=lambda t: (t[0].lo, t[0].hi))
    lo, x, E, leak = problem.best
    return ClassResult(verdict, boxes, max(u for _, u in boxes) if verdict is Verdict.PROVED else max_bound, x, E,
                       leak, lo, res.seconds, res.evaluated, undecided, res.stopped)
