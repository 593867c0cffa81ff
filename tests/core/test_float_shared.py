"""The float setup's shared softmax rows (symbounds.core.float_shared) against an independent
300-bit evaluation of the first layer's attention weights, on the [SL26] model file, on tampered
copies of it (a weight moved by one unit in the 192nd bit, and by 2^-30), and on synthetic rows
whose query boxes are not inside a class's box."""

from __future__ import annotations

from fractions import Fraction as F

import flint
import numpy as np
import pytest

from symbounds.core import float_boxes, float_shared
from symbounds.core.float_boxes import FTM, _softmax_interval
from symbounds.core.modelfile import model_from_json, model_to_json


def _model_json(eps="1/2"):
    from symbounds.papers import shi_liao as sl

    K = sl.constants(sl.Instance(d=2, C_H=1, B=1, eps=eps, target="sin(x1+x2)/2"))
    return model_to_json(sl.build(K), 192)


def _recorded_setup(model, share=True):
    """Run the float setup of ``model``, recording every interval softmax of the first layer
    (``(head, Q, K, tau, keep, pi, ok)``) and the :class:`SharedRows` used."""
    calls, made = [], []
    orig_init, orig_softmax = float_shared.SharedRows.__init__, float_shared.SharedRows.softmax

    def init(self, compute):
        orig_init(self, compute)
        made.append(self)

    def softmax(self, Q, K, tau, keep):
        pi, ok = orig_softmax(self, Q, K, tau, keep) if share else self.compute(Q, K, tau, keep)
        calls.append((Q, K, tau, list(keep), pi, ok))
        return pi, ok

    ev = float_boxes.evaluator(model)
    mp = pytest.MonkeyPatch()
    mp.setattr(float_shared.SharedRows, "__init__", init)
    mp.setattr(float_shared.SharedRows, "softmax", softmax)
    try:
        ev.setup()
    finally:
        mp.undo()
    heads = [hd.index for hd in ev.layers[0].heads]
    assert len(calls) == len(heads)
    return ev, [(h,) + c for h, c in zip(heads, calls)], made


def _exact_weights(model, h, prec=300):
    """``pi_h`` of the first layer at 300 bits, from the model's exact weights (the tokens are the
    embedding's columns; the rows the head reads carry no input)."""
    layer = model.layers[0]
    head = layer.heads[h]
    base = model.embedding.base
    read = {c for W in (head.W_Q, head.W_K) for row in W for c, v in enumerate(row) if v != 0}
    assert all(all(e == 0 for e in model.embedding.E[c]) for c in read)
    n = len(base[0])
    with flint.ctx.workprec(prec):
        q = lambda v: flint.arb(flint.fmpq(F(v).numerator, F(v).denominator))
        tok = [[q(base[c][j]) for j in range(n)] for c in range(len(base))]
        Qm = [[sum((q(W[a][c]) * tok[c][j] for c in read), flint.arb(0)) for j in range(n)] for W in [head.W_Q] for a in range(len(W))]
        Km = [[sum((q(W[a][c]) * tok[c][j] for c in read), flint.arb(0)) for j in range(n)] for W in [head.W_K] for a in range(len(W))]
        inv_tau = flint.arb(1) if layer.tau is None else 1 / q(layer.tau)
        out = []
        for j in range(n):
            s = [sum((Qm[a][j] * Km[a][k] for a in range(len(Qm))), flint.arb(0)) * inv_tau for k in range(n)]
            mx = max(float(v.mid()) for v in s)
            e = [(v - mx).exp() for v in s]
            tot = sum(e, flint.arb(0))
            out.append([v / tot for v in e])
    return out


def _assert_encloses(model, calls):
    """Every recorded interval weight contains the 300-bit value of its entry."""
    for h, _Q, _K, _tau, keep, pi, ok in calls:
        assert ok.all()
        exact = _exact_weights(model, h)
        with flint.ctx.workprec(300):
            for j in range(pi.c.shape[1]):
                for t, k in enumerate(keep):
                    c, r = flint.arb(float(pi.c[0, j, t])), flint.arb(float(pi.r[0, j, t]))
                    v = exact[j][k]
                    assert v.lower() >= c - r and v.upper() <= c + r, (h, j, k)


@pytest.fixture(scope="module")
def model_json():
    return _model_json()


@pytest.fixture(autouse=True)
def share_every_layer(monkeypatch):
    """These small models are below :data:`float_shared.SHARE_FROM_ROWS`: share their rows anyway."""
    monkeypatch.setattr(float_shared, "SHARE_FROM_ROWS", 0)


def test_a_layer_below_the_threshold_is_not_shared(model_json, monkeypatch):
    """Below ``SHARE_FROM_ROWS`` rows (the default certificate's P = 40, the d = 2, P = 256 one) every
    row is computed on its own: the setup is that of the unshared code, bit for bit."""
    model = model_from_json(model_json)
    P = len(model.embedding.base[0])
    made = []
    orig = float_shared.SharedRows.__init__
    monkeypatch.setattr(float_shared.SharedRows, "__init__", lambda self, f: (made.append(self), orig(self, f))[1])
    setups = []
    for threshold in ((P + 2) * P + 1, (P + 2) * P):
        monkeypatch.setattr(float_shared, "SHARE_FROM_ROWS", threshold)
        ev = float_boxes.evaluator(model)
        ev.setup()
        setups.append(ev)
    assert len(made) == 1 and made[0].shared > 0
    unshared = float_boxes.evaluator(model)
    monkeypatch.setattr(float_shared, "rows_for", lambda *a: None)
    unshared.setup()
    x = [(F(1, 3), F(2, 3))]
    lo_hi = [e.enclose(x, x)[:2] for e in setups + [unshared]]
    assert lo_hi[0][0].tolist() == lo_hi[2][0].tolist() and lo_hi[0][1].tolist() == lo_hi[2][1].tolist()


def test_shared_rows_enclose_300_bit_weights_and_share(model_json):
    """The [SL26] model file: each affine head's query at token j is the position of token j - h
    up to the file's rounding, so the P affine heads' P^2 rows fall into P classes; every shared
    weight contains the independent 300-bit value."""
    model = model_from_json(model_json)
    _ev, calls, made = _recorded_setup(model)
    P = len(model.embedding.base[0])
    assert len(made) == 1
    rows = made[0]
    assert rows.shared + rows.computed == (P + 2) * P
    # about P classes for keep = [0] (a few more where a query falls in a neighbouring grid cell), and the
    # position head's P rows (every key kept: a table of its own)
    assert rows.computed <= 3 * P + 2
    _assert_encloses(model, calls)


def test_shared_rows_no_wider_than_unshared_beyond_the_widening(model_json):
    """Shared and unshared setups side by side: a shared weight's radius exceeds the unshared
    one's by at most the widening's effect (relative 2^-30 of the weight), never more, and both
    contain the other's centre up to that."""
    model = model_from_json(model_json)
    _, shared, _ = _recorded_setup(model, share=True)
    _, alone, _ = _recorded_setup(model, share=False)
    for (h, *_, pa, oka), (h2, *_, pb, okb) in zip(shared, alone):
        assert h == h2 and oka.all() and okb.all()
        lo_a, hi_a = pa.c - pa.r, pa.c + pa.r
        lo_b, hi_b = pb.c - pb.r, pb.c + pb.r
        tol = 2.0**-30 * np.abs(pb.c) + 1e-300
        assert (lo_a <= lo_b + tol).all() and (hi_a >= hi_b - tol).all()
        assert (pa.r <= pb.r + tol).all()


def _tampered(model_json, delta: F):
    """The model file with head 3's ``W_Q[0][c]`` (its first nonzero entry) moved by ``delta``
    times the entry (exactly, as a rational)."""
    import copy

    from symbounds.core.exact import parse_number

    mj = copy.deepcopy(model_json)
    row = mj["layers"][0]["heads"][3]["W_Q"][0]
    c = next(i for i, v in enumerate(row) if parse_number(v, "w") != 0)
    v = F(parse_number(row[c], "w"))
    row[c] = str(v + v * delta)
    return mj


@pytest.mark.parametrize("delta,alone", [(F(1, 2**192), False), (F(1, 2**30), True)])
def test_tampered_weight_is_enclosed_shared_or_not(model_json, delta, alone):
    """One layer-1 weight moved by one unit in the 192nd bit stays inside its class's box (and is
    enclosed); moved by 2^-30 it is outside every box, so its rows are computed on their own (one
    more computed row per moved query) and enclosed too: sharing is never assumed."""
    base_model = model_from_json(model_json)
    _, _, made0 = _recorded_setup(base_model)
    model = model_from_json(_tampered(model_json, delta))
    _ev, calls, made = _recorded_setup(model)
    extra = made[0].computed - made0[0].computed
    P = len(model.embedding.base[0])
    if alone:
        assert 1 <= extra <= P
    else:
        assert extra == 0
    _assert_encloses(model, [c for c in calls if c[0] == 3])


def _rows(c, r):
    c, r = np.asarray(c, float), np.asarray(r, float)
    return FTM(c.T[None].copy(), None, r.T[None].copy())


def test_a_row_not_inside_the_class_box_is_computed_on_its_own():
    """Synthetic rows with one key (centres on the key grid, one unit in the last place apart): the
    wide row's radius is 2^-20 (far above the widening), so it must come out exactly as computed
    alone; the narrow one lies inside the class's box and gets the class's weights."""
    K = _rows([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], [[0.0, 0.0]] * 3)
    K = FTM(K.c * 5.0, None, K.r)
    rows = float_shared.SharedRows(_softmax_interval)
    first = _rows([[0.5, 0.75]], [[1e-17, 1e-17]])
    pa, _ = rows.softmax(first, K, None, [0, 1, 2])
    wide = _rows([[0.5, 0.75], [0.5, 0.75 + 2.0**-53]], [[2.0**-20, 2.0**-20], [1e-17, 1e-17]])
    keys, _ = float_shared._row_keys(np.array([[0.5, 0.75], [0.5, 0.75 + 2.0**-53]]), np.full((2, 2), 1e-17))
    assert keys[0] == keys[1]
    pb, okb = rows.softmax(wide, K, None, [0, 1, 2])
    ref, _ = _softmax_interval(_rows([[0.5, 0.75]], [[2.0**-20, 2.0**-20]]), K, None, [0, 1, 2])
    assert np.array_equal(pb.c[0, 0], ref.c[0, 0]) and np.array_equal(pb.r[0, 0], ref.r[0, 0])
    # the second row's box is inside the class's: served by it, bit for bit the first row's weights
    assert np.array_equal(pb.c[0, 1], pa.c[0, 0]) and np.array_equal(pb.r[0, 1], pa.r[0, 0])
    assert rows.computed == 2 and rows.shared == 1 and okb.all()
    # the class's weights hold on its whole widened box: at its corners, in 300-bit balls
    table = next(iter(rows.tables.values()))
    for sx in (-1, 1):
        for sy in (-1, 1):
            corner = [F(table.c[0, a]) + s * F(table.R[0, a]) for a, s in enumerate((sx, sy))]
            for k, v in enumerate(_arb_softmax(corner, K)):
                c, r = flint.arb(float(pa.c[0, 0, k])), flint.arb(float(pa.r[0, 0, k]))
                assert v.lower() >= c - r and v.upper() <= c + r


def _arb_softmax(q, K, prec=300):
    """``softmax_k(<q, K_k>)`` at 300 bits for an exact query ``q`` and point keys ``K``."""
    with flint.ctx.workprec(prec):
        fq = lambda v: flint.arb(flint.fmpq(F(v).numerator, F(v).denominator))
        s = [sum((fq(q[a]) * fq(K.c[0, a, k]) for a in range(len(q))), flint.arb(0)) for k in range(K.c.shape[2])]
        e = [v.exp() for v in s]
        tot = sum(e, flint.arb(0))
        return [v / tot for v in e]


def test_different_keys_scale_or_columns_never_share():
    """A row is served only by a class of bitwise the same keys, scale and value columns."""
    K = _rows([[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0]] * 2)
    K2 = FTM(K.c.copy(), None, K.r + 2.0**-60)
    q = _rows([[0.3, 0.4]], [[0.0, 0.0]])
    rows = float_shared.SharedRows(_softmax_interval)
    rows.softmax(q, K, None, [0, 1])
    for args in [(K2, None, [0, 1]), (K, (0.5, 0.0), [0, 1]), (K, None, [1])]:
        before, tables = rows.computed, len(rows.tables)
        pi, _ = rows.softmax(q, *args)
        assert rows.computed == before + 1 and len(rows.tables) == tables + 1
        table = list(rows.tables.values())[-1]  # a new class, from the row's own widened box
        ref, _ = _softmax_interval(FTM(table.c.T[None], None, table.R.T[None]), *args)
        assert np.array_equal(pi.c, ref.c) and np.array_equal(pi.r, ref.r)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the NaN rows are the point
def test_non_finite_rows_are_computed_alone():
    K = _rows([[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0]] * 2)
    rows = float_shared.SharedRows(_softmax_interval)
    q = _rows([[np.inf, 0.0], [0.0, 0.0], [0.3, 0.4]], [[0.0, 0.0], [0.0, 0.0], [0.0, np.nan]])
    pi, ok = rows.softmax(q, K, None, [0, 1])
    ref, rok = _softmax_interval(q, K, None, [0, 1])
    assert rows.shared == 0 and rows.computed == 3
    assert np.array_equal(pi.c, ref.c, equal_nan=True) and np.array_equal(pi.r, ref.r, equal_nan=True)
    assert np.array_equal(ok, rok)


def test_rows_served_while_new_classes_are_added_keep_their_own_class():
    """A head whose rows both hit earlier classes and open new ones (the classes are re-sorted
    when added): every repeated query gets, bit for bit, the weights its class had before."""
    K = _rows([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], [[0.0, 0.0]] * 3)
    old = [[0.5, a / 16] for a in range(1, 16, 2)]
    new = [[0.5, a / 16] for a in range(2, 16, 2)]
    rows = float_shared.SharedRows(_softmax_interval)
    pa, _ = rows.softmax(_rows(old, [[1e-17, 1e-17]] * len(old)), K, None, [0, 2])
    mixed = [q for pair in zip(old, new) for q in pair]
    pb, _ = rows.softmax(_rows(mixed, [[1e-17, 1e-17]] * len(mixed)), K, None, [0, 2])
    assert rows.computed == len(old) + len(new)
    for i in range(len(new)):
        assert np.array_equal(pb.c[0, 2 * i], pa.c[0, i]) and np.array_equal(pb.r[0, 2 * i], pa.r[0, i])
    for j, q in enumerate(mixed):
        for t, k in enumerate([0, 2]):
            v = _arb_softmax(q, K)[k]
            c, r = flint.arb(float(pb.c[0, j, t])), flint.arb(float(pb.r[0, j, t]))
            assert v.lower() >= c - r and v.upper() <= c + r
