"""The float64 box pass: outward rounding, the Taylor-model operations, whole networks.

Independent computations throughout: exact rationals (Fraction) for the rounding primitives, Arb
balls at 300 bits for exp, and for networks the value at points of each box on a fresh model
object (exact, or 300-bit balls).  A float enclosure that misses one of them is unsound.
"""

import random
from fractions import Fraction as F

import flint
import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from test_soundness import box_points, random_boxes, random_network, true_value

from symbounds.core import outward as fo
from symbounds.core.boxes import Box, box_bound, box_bounds, centre_refutes, float_evaluator
from symbounds.core.float_boxes import FTM, _Boxes, evaluator
from symbounds.core.transformer import Attention, Embedding, Head, Readout, Transformer

TINY = 2.0**-1074


def doubles(rng: random.Random, k: int) -> np.ndarray:
    """Doubles of every kind: ordinary, huge, tiny, subnormal, signed zeros, exact integers."""
    out = []
    for _ in range(k):
        kind = rng.random()
        if kind < 0.5:
            out.append(rng.uniform(-10, 10))
        elif kind < 0.7:
            out.append(rng.choice([-1, 1]) * 2.0 ** rng.uniform(-1074, 1023))
        elif kind < 0.8:
            out.append(rng.choice([-1, 1]) * TINY * rng.randint(1, 2**20))
        elif kind < 0.9:
            out.append(float(rng.randint(-(2**60), 2**60)))
        else:
            out.append(rng.choice([0.0, -0.0, 1.0, -1.0, 0.5]))
    return np.array(out)


def exact(v) -> F:
    return F(float(v))


def arb(q: F) -> flint.arb:
    return flint.arb(flint.fmpq(q.numerator, q.denominator))


# ------------------------------------------------------------------------------------------
# outward rounding


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_up_and_down_bracket_every_correctly_rounded_result(op):
    rng = random.Random(hash(op) % 1000)
    a, b = doubles(rng, 4000), doubles(rng, 4000)
    with np.errstate(all="ignore"):
        y = {"+": a + b, "-": a - b, "*": a * b, "/": a / np.where(b == 0, 1.0, b)}[op]
        lo, hi, e = fo.down(y), fo.up(y), fo.err(y)
    bb = np.where(b == 0, 1.0, b)
    checked = 0
    for i in range(len(a)):
        if not np.isfinite(y[i]):
            continue
        x, z = exact(a[i]), exact(bb[i] if op == "/" else b[i])
        true = x + z if op == "+" else x - z if op == "-" else x * z if op == "*" else x / z
        assert exact(lo[i]) <= true <= exact(hi[i]), (op, a[i], b[i])
        assert abs(true - exact(y[i])) <= exact(e[i]), (op, a[i], b[i])
        checked += 1
    assert checked > 3500


def test_up_is_strictly_above_and_down_below():
    """The bracket must move: up(y) == y would not cover a result that rounded down to y."""
    y = doubles(random.Random(3), 2000)
    assert np.all(fo.up(y) > y) and np.all(fo.down(y) < y)


def test_sum_and_matmul_bounds_against_exact_arithmetic():
    rng = random.Random(5)
    for trial in range(40):
        n = rng.randint(1, 40)
        A = np.abs(doubles(rng, 3 * n).reshape(3, n)) * (1 if trial % 2 else 1e-300)
        B = np.abs(doubles(rng, n * 2).reshape(n, 2))
        A, B = np.where(np.isfinite(A), A, 1.0), np.where(np.isfinite(B), B, 1.0)
        A, B = np.minimum(A, 1e150), np.minimum(B, 1e150)
        S, M, E = fo.sum_up(A, axis=1), fo.matmul_up(A, B), fo.matmul_err(A, B)
        Ms = -A @ B  # a signed product: its rounding error is bounded by matmul_err(|A|, |B|)
        for i in range(3):
            assert sum(exact(v) for v in A[i]) <= exact(S[i])
            for j in range(2):
                true = sum(exact(A[i, k]) * exact(B[k, j]) for k in range(n))
                assert true <= exact(M[i, j])
                assert abs(-true - exact(Ms[i, j])) <= exact(E[i, j])


def test_exp_bounds_enclose_exp_everywhere():
    rng = random.Random(11)
    xs = np.concatenate([
        np.array([rng.uniform(-800, 800) for _ in range(1500)]),
        np.array([rng.uniform(-1e-3, 1e-3) for _ in range(300)]),
        np.array([-745.2, -745.13, -745.1, -708.4, 709.78, 709.7827, 709.79, 0.0, -0.0, 1e-300, -1e-300,
                  np.log(2), 1e6, -1e6, 0.3465, -0.3466]),
    ])
    lo, hi = fo.exp_bounds(xs)
    with flint.ctx.workprec(300):
        for x, a, b in zip(xs, lo, hi):
            e = arb(exact(x)).exp() if abs(x) < 1e5 else None
            assert 0 <= a <= b
            if e is None:
                assert (x > 0 and a == np.finfo(float).max and b == np.inf) or (x < 0 and a == 0 and b <= TINY)
                continue
            assert arb(exact(a)) <= e or a == 0, x
            assert e <= arb(exact(b)) if np.isfinite(b) else True, x
            if -700 < x < 700:  # and tight: the polynomial's 2^-44, and |k| ulp(ln 2) from the reduction
                assert b - a <= 2.0**-42 * b, x


def test_exp_bounds_special_values():
    lo, hi = fo.exp_bounds(np.array([-np.inf, np.inf, np.nan]))
    assert (lo[0], hi[0]) == (0.0, 0.0) and lo[1] == np.inf and hi[1] == np.inf
    assert np.isnan(lo[2]) and np.isnan(hi[2])


def test_from_fraction_encloses():
    for q in [F(1, 3), F(-7, 10), F(2) ** 2000, F(1, 2**1100), F(0), F(10**30 + 1)]:
        m, r = fo.from_fraction(q)
        if r != np.inf:
            assert abs(q - exact(m)) <= exact(r)


# ------------------------------------------------------------------------------------------
# Taylor-model operations: a concrete function inside each operand model, evaluated exactly at
# points of the box, must stay inside the result model at those points.


def _model(rng, B, d, shape, grad=True, scale=1.0):
    c = np.array([rng.uniform(-2, 2) * scale for _ in range(B * int(np.prod(shape)))]).reshape((B,) + shape)
    G = None
    if grad:
        G = np.array([rng.uniform(-3, 3) for _ in range(B * d * int(np.prod(shape)))]).reshape((B, d) + shape)
    r = np.array([rng.choice([0.0, 1e-3, 0.1]) for _ in range(c.size)]).reshape(c.shape)
    return FTM(c, G, r)


def _value(m: FTM, b, idx, delta, frac):
    """The concrete function ``c + <g, delta> + frac * r`` (``frac`` in [-1, 1]) of model ``m``."""
    v = exact(m.c[(b,) + idx]) + frac * exact(m.r[(b,) + idx])
    if m.G is not None:
        v += sum(exact(m.G[(b, i) + idx]) * delta[i] for i in range(len(delta)))
    return v


def _inside(m: FTM, b, idx, delta, true):
    """Is the exact ``true`` inside model ``m`` at ``delta``?"""
    centre = exact(m.c[(b,) + idx])
    if m.G is not None:
        centre += sum(exact(m.G[(b, i) + idx]) * delta[i] for i in range(len(delta)))
    return abs(true - centre) <= exact(m.r[(b,) + idx])


def _points(rng, h):
    d = len(h)
    pts = [tuple(F(rng.choice([-1, 1])) * exact(hi) for hi in h) for _ in range(2)]
    pts += [tuple(exact(hi) * F(rng.randint(-64, 64), 64) for hi in h) for _ in range(3)]
    return pts + [tuple(F(0) for _ in range(d))]


def _exp_exact(v: F):
    with flint.ctx.workprec(300):
        return arb(v).exp()


def exact_elementwise(op, va, vb, k):
    """The exact result of an elementwise operation on exact values (``k``: the scale factor)."""
    return {"add": lambda: va + vb, "sub": lambda: va - vb, "mul": lambda: va * vb, "relu": lambda: max(va, F(0)),
            "reciprocal": lambda: 1 / va, "scale": lambda: k * va}[op]()


def apply_op(bx, op, a, b, W, k):
    """``(result, ok)`` of one operation of the float Taylor models (``ok``: the reciprocal's flags)."""
    if op == "reciprocal":
        return bx.reciprocal(a)
    ops = {"add": lambda: bx.add(a, b), "sub": lambda: bx.add(a, b, -1.0), "mul": lambda: bx.mul(a, b),
           "exp": lambda: bx.exp(a), "relu": lambda: bx.relu(a), "sum": lambda: bx.sum(a, 1),
           "linear": lambda: bx.linear(W, a), "scale": lambda: bx.scale(k, a)}
    return ops[op](), None


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "exp", "reciprocal", "relu", "sum", "linear", "scale"])
def test_operations_enclose_their_exact_results(op, seed):
    rng = random.Random(1000 * seed + hash(op) % 997)
    B, d, shape = 3, rng.choice([1, 2, 3]), (2, 3)
    h = np.array([[rng.choice([1 / 64, 1 / 8, 1 / 2, 0.0]) for _ in range(d)] for _ in range(B)])
    bx = _Boxes(h)
    a = _model(rng, B, d, shape, grad=rng.random() < 0.85, scale=1.0 if op != "exp" else 5.0)
    b = _model(rng, B, d, shape, grad=rng.random() < 0.85)
    if op == "reciprocal":
        a.c = a.c + np.sign(a.c) * 8  # mostly away from 0; the rest must be flagged
    W = (np.array([[rng.uniform(-2, 2) for _ in range(2)] for _ in range(4)]), np.full((4, 2), 1e-3))
    k = (rng.uniform(-3, 3), 1e-2)
    res, ok = apply_op(bx, op, a, b, W, k)
    checked = 0
    for bi in range(B):
        for delta in _points(rng, h[bi]):
            fa, fb = rng.choice([-1, 0, 1, F(1, 3)]), rng.choice([-1, 0, 1, F(-1, 7)])
            Wf, kf = F(rng.choice([-1, 0, 1])), F(rng.choice([-1, 1]))
            for idx in np.ndindex(*res.c.shape[1:]):
                if op in ("add", "sub", "mul", "exp", "reciprocal", "relu", "scale"):
                    va, vb = _value(a, bi, idx, delta, fa), _value(b, bi, idx, delta, fb)
                    if op == "reciprocal" and not ok[(bi,) + idx]:
                        continue
                    if op != "exp":
                        true = exact_elementwise(op, va, vb, exact(k[0]) + kf * exact(k[1]))
                    else:
                        e = _exp_exact(va)
                        centre = exact(res.c[(bi,) + idx])
                        if res.G is not None:
                            centre += sum(exact(res.G[(bi, i) + idx]) * delta[i] for i in range(d))
                        with flint.ctx.workprec(300):
                            assert abs(e - arb(centre)) <= arb(exact(res.r[(bi,) + idx])), (idx, delta)
                        checked += 1
                        continue
                elif op == "sum":
                    true = sum(_value(a, bi, (idx[0], j), delta, fa) for j in range(shape[1]))
                else:  # linear: rows of W (each weight anywhere in its ball) times the columns of a
                    true = sum((exact(W[0][idx[0], q]) + Wf * exact(W[1][idx[0], q])) * _value(a, bi, (q, idx[1]), delta, fa)
                               for q in range(shape[0]))
                assert _inside(res, bi, idx, delta, true), (op, bi, idx, delta)
                checked += 1
    assert checked > 20


def test_reciprocal_flags_a_range_through_zero():
    bx = _Boxes(np.array([[0.5]]))
    a = FTM(np.array([[1.0, 1.0]]), np.array([[[0.1, 4.0]]]), np.array([[0.0, 0.0]]))
    _, ok = bx.reciprocal(a)
    assert ok.tolist() == [[True, False]]


# ------------------------------------------------------------------------------------------
# whole networks


def check_float_enclosures(seed: int, n_boxes: int, n_points: int) -> int:
    """Random boxes, in random order and random batches, on one evaluator: each box's float
    range must contain the true value at points of the box.  Returns how many were decided."""
    rng = random.Random(seed)
    d = rng.choice([1, 2])
    model = random_network(rng, d)
    fast = evaluator(model)
    assert fast is not None
    fast.setup()
    boxes = random_boxes(rng, d, n_boxes)
    decided = 0
    while boxes:
        k = rng.randint(1, len(boxes))
        batch, boxes = boxes[:k], boxes[k:]
        lo, hi, ok = fast.ranges([b.lo for b in batch], [b.hi for b in batch])
        for box, a, z, good in zip(batch, lo, hi, ok):
            if not good:
                continue
            decided += 1
            for x in box_points(rng, box, n_points):
                vlo, vhi = true_value(model, x)
                assert vlo <= exact(z) and exact(a) <= vhi, (seed, box, x, (a, z), (vlo, vhi))
    return decided


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_random_networks_float_enclosures(seed):
    check_float_enclosures(seed, n_boxes=6, n_points=2)


def test_random_networks_float_enclosures_fixed_seeds():
    decided = sum(check_float_enclosures(s, n_boxes=6, n_points=1) for s in range(40))
    assert decided >= 150


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_random_networks_float_enclosures_long_run(seed):
    check_float_enclosures(seed, n_boxes=10, n_points=4)


def _shi_liao_model(d=1, eps="1/2"):
    from symbounds.core.modelfile import model_from_json, model_to_json
    from symbounds.papers import shi_liao as sl

    inst = sl.Instance(d=d, eps=eps) if d == 1 else sl.Instance(d=2, C_H=1, B=1, eps=eps, target="sin(x1+x2)/2")
    K = sl.constants(inst)
    return inst, K, model_from_json(model_to_json(sl.build(K), 192))


@pytest.mark.parametrize("d", [1, 2])
def test_shi_liao_float_ranges_contain_ball_values(d):
    """The partition-of-unity network (large attention scales, leakage far below float64's
    resolution): float box ranges contain 300-bit values at points of each box, on the model file
    and on the exact construction (the weights as SymPy expressions)."""
    from symbounds.papers import shi_liao as sl

    _inst, K, model = _shi_liao_model(d, "1/2")
    rng = random.Random(d)
    boxes = random_boxes(rng, d, 8)
    boxes = [Box(tuple(max(F(0), v) for v in b.lo), tuple(min(F(1), v) for v in b.hi)) for b in boxes]
    for m in (model, sl.build(K)):
        fast = evaluator(m)
        lo, hi, ok = fast.ranges([b.lo for b in boxes], [b.hi for b in boxes])
        assert ok.sum() >= 6
        for box, a, z, good in zip(boxes, lo, hi, ok):
            if good:
                for x in box_points(rng, box, 2):
                    vlo, vhi = true_value(m, x)
                    assert vlo <= exact(z) and exact(a) <= vhi, (box, x)


def test_float_bounds_against_arb_bounds_and_point_errors_on_the_shi_liao_network():
    """Both are upper bounds of the same sup over the box, so both are at least the error at the
    box's centre (300-bit balls); the float one (its softmax shift follows the weight-averaged
    gradient) is no looser than the Arb one here beyond float precision."""
    from symbounds.core.boxes import point_error

    _inst, K, model = _shi_liao_model(1, "1/2")
    fast = float_evaluator(model, 128)
    boxes = [Box((F(i, 256),), (F(i + 1, 256),)) for i in range(0, 256, 37)]
    fb = box_bounds(model, K.g, 1, boxes, 128, fast)
    ab = [box_bound(model, K.g, 1, b, 128) for b in boxes]
    for box, f, a in zip(boxes, fb, ab):
        assert f is not None and a is not None
        least = point_error(model, K.g, 1, box.centre, 300).lower()
        assert arb(f) >= least and arb(a) >= least
        assert f <= a * (1 + F(1, 10**6)), (float(f), float(a))


def test_centre_refutes_only_violations():
    """``T = x - 1/2`` against targets 0 (|T| <= 1/2, at the centre 1/2 of [0, 1]: 0) and 1
    (|T - 1| = 1 at the centre)."""
    from test_soundness import residual_shift_model

    model = residual_shift_model()
    fast = float_evaluator(model, 128)
    box = Box((F(0),), (F(1),))
    assert centre_refutes(model, sympy.Integer(0), 1, [box], 128, fast, F(1, 4)) == [False]
    (text,) = centre_refutes(model, sympy.Integer(1), 1, [box], 128, fast, F(1, 4))
    assert isinstance(text, str) and text.startswith("[1.00000") and "+/-" in text  # |0 - 1| = 1
    assert centre_refutes(model, sympy.Integer(1), 1, [box], 128, None, F(1, 4)) == [None]


def test_no_float_path_for_hardmax_or_token_models():
    head = Head(W_Q=((1,),), W_K=((1,),), W_V=((1,),), W_O=((1,),))
    emb = Embedding(base=((0,),), E=((1,),), column=0)
    hard = Transformer(layers=(Attention((head,), "hardmax", skip=1),), embedding=emb, readout=Readout(0, 0))
    tokens = Transformer(layers=(Attention((head,), "softmax"),), input="tokens", readout=Readout(0, 0))
    assert evaluator(hard) is None and evaluator(tokens) is None


def test_add_broadcasts_the_gradient_of_the_smaller_operand():
    """A model with a gradient of shape (1,) plus a constant of shape (3,): the sum has a gradient
    for each of the three entries (each x + k_j), not one."""
    bx = _Boxes(np.array([[0.5]]))
    x = FTM(np.array([[0.5]]), np.array([[[1.0]]]), np.array([[0.0]]))
    k = FTM(np.array([[0.0, 1.0, 2.0]]), None, np.zeros((1, 3)))
    s = bx.add(k, x)
    assert s.c.shape == (1, 3) and s.G.shape == (1, 1, 3)
    lo, hi = bx.range(s)
    assert lo[0].tolist() == pytest.approx([0.0, 1.0, 2.0]) and hi[0].tolist() == pytest.approx([1.0, 2.0, 3.0])
    assert np.all(lo[0] <= [0, 1, 2]) and np.all(hi[0] >= [1, 2, 3])
