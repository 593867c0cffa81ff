"""The a-priori bounds of LayerNorm and RMSNorm in every evaluator of a layer graph.

For ``y_i = w_i (x_i - mu) s + b_i``, ``s = 1/sqrt(m + eps)``, ``m`` the mean of ``(x_j - mu)^2``:
the deviations sum to 0, so by Cauchy-Schwarz ``(x_i - mu)^2 <= (n - 1) m`` and ``|y_i - b_i| <=
sqrt(n - 1) |w_i|`` for every input; RMSNorm ``|y_i| <= sqrt(n) |w_i|``.  Every evaluator (Arb
balls and Taylor models of :mod:`symbounds.core.graph`, the float64 box pass of
:mod:`symbounds.core.float_graph`, the backward linear bounds of
:mod:`symbounds.core.linear_graph`) meets the norm's output with that bound.  Checked here against
a 300-bit mpmath evaluation of the textbook formulas (independent of the code): inclusion at
corners and sampled points, the enclosure inside the cap on a box where a row's variance comes
close to 0 (and far wider than the cap without it), random graphs in random boxes, and a cap one
step too tight (``sqrt(n - 2)``) caught on a row whose ``|x_i - mu| s`` is close to ``sqrt(n - 1)``.
"""

import itertools
import random
from fractions import Fraction

import flint
import mpmath
import pytest

from symbounds.core import float_graph as fg
from symbounds.core import graph as gr
from symbounds.core import linear_graph as lg
from symbounds.core.contexts import BallContext
from symbounds.core.graph import Graph, Node
from symbounds.core.taylor import TaylorContext

MP = mpmath.MPContext()
MP.prec = 300
PREC = 128
EVALUATORS = ("ball", "taylor", "float", "linear")


def mpq(q) -> mpmath.mpf:
    q = Fraction(q)
    return MP.mpf(q.numerator) / q.denominator


# ------------------------------------------------------------------------------------------
# the reference: the textbook formulas at 300 bits


def _ref_row(nd: Node, rows: list) -> list:
    p, x = nd.params, rows[0]
    if nd.op == "affine":
        return [sum(mpq(a) * v for a, v in zip(Wi, x)) + mpq(bi) for Wi, bi in zip(p["W"], p["b"])]
    if nd.op == "tanh":
        return [MP.tanh(v) for v in x]
    if nd.op == "gelu":
        return [v * MP.ncdf(v) for v in x]
    n = len(x)
    eps = mpq(p["eps"])
    if nd.op == "layer_norm":
        mu = sum(x) / n
        var = sum((v - mu) ** 2 for v in x) / n
        return [(v - mu) / MP.sqrt(var + eps) * mpq(w) + mpq(b) for v, w, b in zip(x, p["weight"], p["bias"])]
    ms = sum(v * v for v in x) / n
    return [v / MP.sqrt(ms + eps) * mpq(w) for v, w in zip(x, p["weight"])]


def reference(g: Graph, flat: list) -> list:
    """The graph's outputs (row by row) at the exact input ``flat`` (row by row), in mpmath."""
    T, W = g.tokens, g.in_width
    vals = {g.input_name: [[mpq(flat[t * W + j]) for j in range(W)] for t in range(T)]}
    for nd in g.nodes:
        vals[nd.name] = [_ref_row(nd, [vals[i][t] for i in nd.inputs]) for t in range(T)]
    return [v for row in vals[g.output] for v in row]


def to_q(v) -> Fraction:
    """The exact value of a 300-bit mpf."""
    sign, man, exp, _ = MP.mpf(v)._mpf_
    man = -int(man) if sign else int(man)
    return Fraction(man * 2 ** int(exp)) if exp >= 0 else Fraction(man, 2 ** int(-exp))


# ------------------------------------------------------------------------------------------
# the enclosures of every evaluator, as exact rational bounds


def _ball_q(b: flint.arb):
    return lg._frac(flint.arb(b.lower())), lg._frac(flint.arb(b.upper()))


def enclosures(g: Graph, lo: list, hi: list, need_linear: bool = True) -> dict:
    """``{evaluator: [(lower, upper)]}`` (exact rationals, outputs row by row) over the box; the
    linear bounds may be absent (None: some relaxation's range not finite, which their contract
    allows) unless ``need_linear``."""
    centre = [(a + b) / 2 for a, b in zip(lo, hi)]
    half = [(b - a) / 2 for a, b in zip(lo, hi)]
    out = {}
    ball = BallContext(PREC)
    with ball.scope():
        out["ball"] = [_ball_q(y) for y in g.evaluate(ball, [ball.interval(a, b) for a, b in zip(lo, hi)])]
    ctx = TaylorContext(PREC, centre, half)
    with ctx.scope():
        out["taylor"] = [_ball_q(y.range()) for y in g.evaluate(ctx, ctx.inputs())]
    ev = fg.evaluator(g)
    flo, fhi, ok = ev.ranges([lo], [hi])
    assert ok[0]
    out["float"] = [(Fraction(float(a)), Fraction(float(b))) for a, b in zip(flo[0], fhi[0])]
    lin = lg.linear_graph_bounds(g, centre, half)
    assert lin is not None or not need_linear
    if lin is not None:
        out["linear"] = [(lg._frac(a), lg._frac(b)) for a, b in lin]
    return out


def sample(lo: list, hi: list, rng: random.Random, k: int, corners: bool = True) -> list:
    """The box's corners (all of them for up to 8 inputs, else ``k`` random ones), its centre and
    ``k`` uniform points, exact rationals."""
    n = len(lo)
    pts = []
    if corners:
        cs = itertools.product((0, 1), repeat=n) if n <= 8 else ([rng.randint(0, 1) for _ in range(n)] for _ in range(k))
        pts += [[hi[i] if c[i] else lo[i] for i in range(n)] for c in cs]
    pts.append([(a + b) / 2 for a, b in zip(lo, hi)])
    for _ in range(k):
        pts.append([a + (b - a) * Fraction(rng.randint(0, 1000), 1000) for a, b in zip(lo, hi)])
    return pts


def misses(g: Graph, lo: list, hi: list, pts: list, need_linear: bool = True) -> dict:
    """``{evaluator: number of (point, output) pairs whose 300-bit value lies outside}``."""
    enc = enclosures(g, lo, hi, need_linear)
    count = dict.fromkeys(enc, 0)
    slack = Fraction(1, 2**250)
    for pt in pts:
        for k, v in enumerate(reference(g, pt)):
            q = to_q(v)
            for name, bs in enc.items():
                a, b = bs[k]
                if not (a - slack * (1 + abs(q)) <= q <= b + slack * (1 + abs(q))):
                    count[name] += 1
    return count


def _norm_graph(op: str, n: int, eps, w, b=None, tokens: int = 1) -> Graph:
    params = {"eps": Fraction(eps), "weight": tuple(w)}
    if op == "layer_norm":
        params["bias"] = tuple(b)
    return Graph("x", tokens, n, (Node("y", op, ("x",), params),), "y", {"x": n, "y": n})


def cap_of(op: str, n: int, w, b) -> list:
    """The exact cap's ends up to 1e-30 (``sqrt(k)`` from mpmath at 300 bits)."""
    root = MP.sqrt(n - 1 if op == "layer_norm" else n)
    return [(to_q(mpq(bi) - root * abs(mpq(wi))), to_q(mpq(bi) + root * abs(mpq(wi)))) for wi, bi in zip(w, b)]


# ------------------------------------------------------------------------------------------
# a LayerNorm whose row's variance comes close to 0 on the box

W5 = [Fraction(13, 10), Fraction(-7, 10), Fraction(9, 10), Fraction(21, 10), Fraction(-1, 2)]
B5 = [Fraction(1, 10), Fraction(-2, 10), Fraction(3, 10), Fraction(0), Fraction(1, 4)]


def _flat_box(op: str):
    """Width 0.1 in every entry around nearly equal values: the variance reaches about 0."""
    n = len(W5)
    g = _norm_graph(op, n, Fraction(1, 10**5), W5, B5)
    centre = [Fraction(1), Fraction(101, 100), Fraction(99, 100), Fraction(102, 100), Fraction(1)]
    lo = [c - Fraction(1, 20) for c in centre]
    hi = [c + Fraction(1, 20) for c in centre]
    return g, lo, hi


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_a_nearly_constant_row_is_enclosed_inside_the_cap_and_contains_the_values(op):
    """Every evaluator contains the 300-bit values at the 32 corners and 40 sampled points, and
    is inside the cap ``b_i +- sqrt(n - 1) |w_i|`` (RMSNorm ``+- sqrt(n) |w_i|``) up to its
    outward rounding (``2^-26`` of the cap: an Arb ball's radius carries 30 bits).  For LayerNorm the box reaches variance 0, and each
    evaluator without the cap is wider than the cap (so the second check bites)."""
    g, lo, hi = _flat_box(op)
    pts = sample(lo, hi, random.Random(5), 40)
    assert misses(g, lo, hi, pts) == dict.fromkeys(EVALUATORS, 0)
    caps = cap_of(op, len(W5), W5, B5 if op == "layer_norm" else [0] * len(W5))
    enc = enclosures(g, lo, hi)
    for name, bs in enc.items():
        for (a, b), (ca, cb) in zip(bs, caps):
            tol = (cb - ca) / 2**26
            assert ca - tol <= a and b <= cb + tol, (name, float(a), float(b), float(ca), float(cb))


def test_without_the_cap_the_nearly_constant_row_is_enclosed_wider_than_the_cap(monkeypatch):
    """The case above is one the cap decides: with the cap lifted (``k = 10^12``) every evaluator
    encloses some output of the LayerNorm wider than ``2 sqrt(n - 1) |w_i|``."""
    g, lo, hi = _flat_box("layer_norm")
    monkeypatch.setattr(gr, "norm_cap_square", lambda op, n: 10**12)
    g = _norm_graph("layer_norm", len(W5), Fraction(1, 10**5), W5, B5)  # fresh caches
    caps = cap_of("layer_norm", len(W5), W5, B5)
    for name, bs in enclosures(g, lo, hi).items():
        assert any(b - a > cb - ca for (a, b), (ca, cb) in zip(bs, caps)), name


# ------------------------------------------------------------------------------------------
# one entry apart from n - 1 equal ones: |x_i - mu| s close to sqrt(n - 1)


def _extreme_case(op: str, n: int = 4):
    """``x = (3, 0, ..., 0)`` +- 1e-9, ``eps = 1e-14``: ``|x_0 - mu| s = sqrt(n - 1) (1 - ~1e-14)``
    (LayerNorm), ``|x_0| s = sqrt(n) (1 - ~1e-14)`` (RMSNorm)."""
    w = [Fraction(3, 2), Fraction(-5, 4), Fraction(7, 8), Fraction(1, 3)][:n]
    b = [Fraction(1, 5), Fraction(-1, 7), Fraction(0), Fraction(2)][:n]
    g = _norm_graph(op, n, Fraction(1, 10**14), w, b)
    centre = [Fraction(3)] + [Fraction(0)] * (n - 1)
    h = Fraction(1, 10**9)
    return g, [c - h for c in centre], [c + h for c in centre]


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_the_cap_holds_where_the_bound_is_nearly_reached(op):
    """On the extreme row the true output is within ~1e-14 of the cap's end: every evaluator
    still contains the 300-bit values (the cap's ends are rounded outward, not to nearest)."""
    g, lo, hi = _extreme_case(op)
    ref = reference(g, [(a + b) / 2 for a, b in zip(lo, hi)])
    root = MP.sqrt(3 if op == "layer_norm" else 4)
    w0 = mpq(g.nodes[0].params["weight"][0])
    b0 = mpq(g.nodes[0].params["bias"][0]) if op == "layer_norm" else 0
    assert abs(ref[0] - (b0 + root * abs(w0))) < MP.mpf(10) ** -12  # the case is extreme
    assert misses(g, lo, hi, sample(lo, hi, random.Random(2), 10)) == dict.fromkeys(EVALUATORS, 0)


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm"])
def test_a_cap_one_step_too_tight_is_caught(op, monkeypatch):
    """The mutant ``sqrt(n - 2)`` (RMSNorm ``sqrt(n - 1)``) instead of ``sqrt(n - 1)`` (``sqrt(n)``)
    in :func:`symbounds.core.graph.norm_cap_square`, which every evaluator reads: each of them
    then misses the 300-bit value of the extreme row (so the inclusion checks above can fail)."""
    monkeypatch.setattr(gr, "norm_cap_square", lambda o, n: n - 2 if o == "layer_norm" else n - 1)
    g, lo, hi = _extreme_case(op)
    got = misses(g, lo, hi, sample(lo, hi, random.Random(2), 10))
    assert all(got[name] > 0 for name in EVALUATORS), got


# ------------------------------------------------------------------------------------------
# random graphs in random boxes


def _random_graph(rng: random.Random, tokens: int, width: int) -> Graph:
    """``affine -> norm -> (tanh | gelu) -> affine -> norm`` or a norm on the input first, random
    rational weights, ``eps`` from 1e-12 to 1/10, some weights 0 and some rows of ``W`` equal (so
    the norm's input can be nearly constant)."""
    r = lambda: Fraction(rng.randint(-2000, 2000), 1000)
    nodes, src, w = [], "x", width
    k = 0

    def add(op, params, out_w):
        nonlocal src, w, k
        k += 1
        nodes.append(Node(f"n{k}", op, (src,), params))
        src, w = f"n{k}", out_w

    def norm():
        op = rng.choice(["layer_norm", "rms_norm"])
        params = {"eps": Fraction(1, 10 ** rng.choice([1, 5, 12])), "weight": tuple(r() if rng.random() > 0.1 else Fraction(0)
                                                                                   for _ in range(w))}
        if op == "layer_norm":
            params["bias"] = tuple(r() for _ in range(w))
        add(op, params, w)

    if rng.random() < 0.5:
        norm()
    m = rng.randint(1, 5)
    row = [r() for _ in range(w)]
    W = [list(row) if rng.random() < 0.3 else [r() for _ in range(w)] for _ in range(m)]
    add("affine", {"W": tuple(tuple(x) for x in W), "b": tuple(r() / 10 for _ in range(m))}, m)
    norm()
    add(rng.choice(["tanh", "gelu"]), {}, w)
    m2 = rng.randint(1, 4)
    add("affine", {"W": tuple(tuple(r() for _ in range(w)) for _ in range(m2)), "b": tuple(r() for _ in range(m2))}, m2)
    norm()
    widths = {"x": width}
    return Graph("x", tokens, width, tuple(nodes), src, widths)


@pytest.mark.parametrize("seed", range(24))
def test_random_graphs_with_norms_contain_the_300_bit_values(seed):
    """Random graphs of norms, affine maps, tanh and GELU over random boxes (half-widths 0 to 2,
    centres sometimes equal in a row): every evaluator contains the 300-bit values at corners and
    sampled points, and the last norm's output lies inside its cap up to rounding."""
    rng = random.Random(1000 + seed)
    tokens, width = rng.choice([(1, 2), (1, 3), (2, 2)])
    g = _random_graph(rng, tokens, width)
    n_in = tokens * width
    base = Fraction(rng.randint(-3000, 3000), 1000)
    centre = [base if rng.random() < 0.4 else Fraction(rng.randint(-3000, 3000), 1000) for _ in range(n_in)]
    half = [rng.choice([Fraction(0), Fraction(1, 10**6), Fraction(1, 20), Fraction(1, 2), Fraction(2)])
            for _ in range(n_in)]
    lo, hi = [c - h for c, h in zip(centre, half)], [c + h for c, h in zip(centre, half)]
    pts = sample(lo, hi, rng, 12)
    got = misses(g, lo, hi, pts, need_linear=False)
    assert set(got) >= {"ball", "taylor", "float"} and not any(got.values()), (seed, got, g.nodes)
    last = g.nodes[-1]
    n = len(last.params["weight"])
    caps = cap_of(last.op, n, last.params["weight"], last.params.get("bias", [0] * n))
    for name, bs in enclosures(g, lo, hi, need_linear=False).items():
        for e, (a, b) in enumerate(bs):
            ca, cb = caps[e % n]
            tol = (cb - ca) / 2**26 + (abs(ca) + abs(cb)) / 2**48 + Fraction(1, 2**60)  # doubles: ulps
            assert ca - tol <= a and b <= cb + tol, (seed, name, e)
