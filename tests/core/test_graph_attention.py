"""The ``attention`` node and the token/column operations of a layer graph (docs/model-graph.md).

Every enclosure is checked against a reference written here from the formulas alone (300-bit
mpmath for the softmax, exact rationals for the hardmax, the sequences found by a row's index
arithmetic): Arb balls and Taylor models over random boxes of random graphs (heads, widths, masks,
layouts, sequence lengths) contain the reference at sampled points; a hand-worked case; the
extremes (scores tied to 2^-100, scores of 10^6, hardmax ties); the Taylor-model softmax head
(score differences, centred values, interval weights) on near-tied masked multi-head boxes, and
narrower than the former formula computed here; PyTorch's ``nn.MultiheadAttention``
in float64 with the same weights, which a tampered weight, scale or layout no longer matches; the
file's round trip and schema; bad files refused with one line, exit 2."""

import copy
import json
import random
from fractions import Fraction
from pathlib import Path

import jsonschema
import mpmath
import pytest
import torch

from symbounds.core.bound import bound
from symbounds.core.contexts import BallContext, ExactContext, ExactUnsupported, MPContext, Undecided
from symbounds.core.graph_file import MAX_SEQUENCE, GraphFileError, graph_from_json, graph_to_json, load_graph
from symbounds.core.taylor import TaylorContext

from cli_helpers import run_cli

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "schemas" / "graph.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
MP = mpmath.MPContext()
MP.prec = 300


# ------------------------------------------------------------------------------------------
# the reference: the formulas of docs/model-graph.md, written without the library's code


def _q(s) -> Fraction:
    return Fraction(s)


def _number(exact):
    """A file's number (or an exact input) as a Fraction (``exact``) or a 300-bit mpf."""
    if exact:
        return lambda v: Fraction(v)
    def mp(v):
        if isinstance(v, (str, int, Fraction)):
            q = Fraction(v)
            return MP.mpf(q.numerator) / q.denominator
        return v
    return mp


def _seq_of(t, T, L, layout):
    """(sequence, position) of row ``t``."""
    S = T // L
    return (t // L, t % L) if layout == "batch_major" else (t % S, t // S)


def _attends(mask, j, k):
    if mask is None:
        return True
    if mask == "causal":
        return k <= j
    return mask[j][k] == 1


def _affine_ref(W, b, x, num):
    out = []
    for row, bi in zip(W, b):
        acc = num(bi)
        for w, v in zip(row, x):
            acc = acc + num(w) * v
        out.append(acc)
    return out


def _attention_ref(nd, X, exact):
    """Rows of the attention node at the rows ``X``: 300-bit mpf, or exact Fractions for a
    hardmax node in an all-hardmax graph (``exact``)."""
    num = _number(exact)
    T = len(X)
    h = nd["heads"]
    L = nd.get("sequence_length", T)
    layout = nd.get("layout", "batch_major")
    mask = nd.get("mask")
    zeros = lambda m: ["0"] * len(nd[m])
    Q = [_affine_ref(nd["Wq"], nd.get("bq", zeros("Wq")), x, num) for x in X]
    K = [_affine_ref(nd["Wk"], nd.get("bk", zeros("Wk")), x, num) for x in X]
    V = [_affine_ref(nd["Wv"], nd.get("bv", zeros("Wv")), x, num) for x in X]
    dk, dv = len(Q[0]) // h, len(V[0]) // h
    sc = nd["scale"]
    out = []
    for j in range(T):
        sj, pj = _seq_of(j, T, L, layout)
        keys = [k for k in range(T) if _seq_of(k, T, L, layout)[0] == sj and _attends(mask, pj, _seq_of(k, T, L, layout)[1])]
        o = []
        for i in range(h):
            s = {k: sum(Q[j][i * dk + a] * K[k][i * dk + a] for a in range(dk)) for k in keys}
            if nd.get("hardmax"):
                top = max(s.values())  # a positive scale keeps the argmax
                win = [k for k in keys if s[k] == top]
                w = {k: (num(Fraction(1, len(win))) if k in win else num(0)) for k in keys}
            else:
                scale = 1 / MP.sqrt(sc["inv_sqrt"]) if isinstance(sc, dict) else num(sc)
                e = {k: MP.exp(scale * s[k]) for k in keys}
                tot = sum(e.values())
                w = {k: e[k] / tot for k in keys}
            for a in range(dv):
                acc = num(0)
                for k in keys:
                    acc = acc + w[k] * V[k][i * dv + a]
                o.append(acc)
        out.append(_affine_ref(nd["Wo"], nd.get("bo", zeros("Wo")), o, num))
    return out


def reference(doc, x_flat):
    """The graph's flat output (row by row) at the flat input: exact Fractions where every node
    is rational (hardmax), else 300-bit mpf."""
    inp = doc["input"]
    T, E = inp["tokens"], inp["width"]
    exact = all(nd["op"] != "attention" or nd.get("hardmax") for nd in doc["nodes"])
    num = _number(exact)
    x_flat = [num(v) for v in x_flat]
    vals = {inp["name"]: [list(x_flat[t * E:(t + 1) * E]) for t in range(T)]}
    for nd in doc["nodes"]:
        X = vals[nd["inputs"][0]]
        op = nd["op"]
        if op == "attention":
            Y = _attention_ref(nd, X, exact)
        elif op == "slice":
            Y = [x[nd["start"]:nd["stop"]] for x in X]
        elif op == "concat":
            Y = [sum((vals[n][t] for n in nd["inputs"]), []) for t in range(len(X))]
        elif op == "select_tokens":
            Y = [X[i] for i in nd["indices"]]
        elif op == "mean_tokens":
            L = nd.get("sequence_length", len(X))
            layout = nd.get("layout", "batch_major")
            Y = []
            for seq in range(len(X) // L):
                rows = [X[t] for t in range(len(X)) if _seq_of(t, len(X), L, layout)[0] == seq]
                Y.append([sum(col, num(0)) / L for col in zip(*rows)])
        elif op == "affine":
            Y = [_affine_ref(nd["W"], nd.get("b", ["0"] * len(nd["W"])), x, num) for x in X]
        elif op == "add":
            Y = [[a + b for a, b in zip(u, v)] for u, v in zip(X, vals[nd["inputs"][1]])]
        else:
            raise AssertionError(op)
        vals[nd["name"]] = Y
    return [v for row in vals[doc["output"]] for v in row]


def _exact(vals) -> list:
    """Exact-context numbers (``flint.fmpq``) as Fractions."""
    return [Fraction(int(v.p), int(v.q)) for v in vals]


def _frac(v) -> Fraction:
    if isinstance(v, Fraction):
        return v
    sign, man, exp, _ = MP.mpf(v)._mpf_  # a binary number: (-1)^sign man 2^exp, exactly
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def assert_encloses(ctx, vals, ref, what="") -> int:
    """Every ball of ``vals`` contains the reference (up to its 300-bit rounding); returns how many
    balls were finite (a NaN or infinite ball, Arb's "no information", encloses everything)."""
    assert len(vals) == len(ref)
    finite = 0
    for k, (v, r) in enumerate(zip(vals, ref)):
        if not v.is_finite():
            continue
        finite += 1
        lo, hi = ctx.to_fraction_bounds(v)
        r = _frac(r)
        tol = Fraction(1, 2**250) * (1 + abs(r))  # the reference's own rounding (300 bits)
        assert lo - tol <= r <= hi + tol, f"{what} output {k}: {float(r)} outside [{float(lo)}, {float(hi)}]"
    return finite


# ------------------------------------------------------------------------------------------
# random graphs


def _num(rng, den=8, top=8):
    return str(Fraction(rng.randint(-top, top), den))


def _mat(rng, rows, cols, den=8):
    return [[_num(rng, den) for _ in range(cols)] for _ in range(rows)]


def random_attention(rng, name, src, E, T, hardmax=False, den=8):
    """A random attention node on a tensor of ``T`` rows of width ``E``."""
    h, dk, dv, Eo = rng.randint(1, 3), rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 3)
    L = rng.choice([d for d in range(1, T + 1) if T % d == 0])
    nd = {"name": name, "op": "attention", "inputs": [src], "heads": h,
          "Wq": _mat(rng, h * dk, E, den), "Wk": _mat(rng, h * dk, E, den), "Wv": _mat(rng, h * dv, E, den),
          "Wo": _mat(rng, Eo, h * dv, den),
          "scale": rng.choice([{"inv_sqrt": dk}, {"inv_sqrt": rng.randint(1, 5)}, str(Fraction(rng.randint(1, 9), 4))])}
    for b, m in (("bq", "Wq"), ("bk", "Wk"), ("bv", "Wv"), ("bo", "Wo")):
        if rng.random() < 0.7:
            nd[b] = [_num(rng, den) for _ in nd[m]]
    if L != T or rng.random() < 0.5:
        nd["sequence_length"] = L
    if rng.random() < 0.5:
        nd["layout"] = rng.choice(["batch_major", "sequence_major"])
    kind = rng.choice(["none", "causal", "matrix"])
    if kind == "causal":
        nd["mask"] = "causal"
    elif kind == "matrix":
        m = [[rng.randint(0, 1) for _ in range(L)] for _ in range(L)]
        for row in m:
            row[rng.randrange(L)] = 1
        nd["mask"] = m
    if hardmax:
        nd["hardmax"] = True
    return nd, Eo


def random_graph(rng, hardmax=False):
    """Input [T, E]; an attention node; then one of the token/column ops; then a second
    attention node (a residual sum where shapes allow)."""
    T, E = rng.choice([(2, 1), (2, 2), (3, 1), (4, 1), (4, 2), (6, 1)])
    nodes = []
    a, Eo = random_attention(rng, "a", "x", E, T, hardmax)
    nodes.append(a)
    last, w, t = "a", Eo, T
    op = rng.choice(["slice", "concat", "select_tokens", "mean_tokens", "add"])
    if op == "slice" and w > 1:
        start = rng.randrange(w)
        nodes.append({"name": "b", "op": "slice", "inputs": [last], "start": start, "stop": rng.randint(start + 1, w)})
        w = nodes[-1]["stop"] - start
    elif op == "concat":
        nodes.append({"name": "b", "op": "concat", "inputs": [last, "x", last]})
        w = 2 * w + E
    elif op == "select_tokens":
        idx = [rng.randrange(t) for _ in range(rng.randint(1, 3))]
        nodes.append({"name": "b", "op": "select_tokens", "inputs": [last], "indices": idx})
        t = len(idx)
    elif op == "mean_tokens":
        L = rng.choice([d for d in range(1, t + 1) if t % d == 0])
        nodes.append({"name": "b", "op": "mean_tokens", "inputs": [last], "sequence_length": L,
                      "layout": rng.choice(["batch_major", "sequence_major"])})
        t //= L
    elif op == "add" and w == E:
        nodes.append({"name": "b", "op": "add", "inputs": [last, "x"]})
    else:
        nodes.append({"name": "b", "op": "affine", "inputs": [last], "W": _mat(rng, 2, w)})
        w = 2
    a2, _ = random_attention(rng, "c", "b", w, t, hardmax)
    nodes.append(a2)
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": T, "width": E}, "nodes": nodes,
            "output": "c"}


def _points(rng, lo, hi, n):
    pts = [list(lo), list(hi)]
    for _ in range(n):
        pts.append([a + (b - a) * Fraction(rng.randint(0, 16), 16) for a, b in zip(lo, hi)])
    return pts


def test_random_graphs_ball_and_taylor_enclosures_contain_the_300_bit_reference():
    rng = random.Random(2026)
    taylor_ok, finite, total = 0, 0, 0
    for trial in range(30):
        doc = random_graph(rng)
        g = graph_from_json(doc)
        assert g.output_count == len(reference(doc, [Fraction(0)] * g.input_count))
        n = g.input_count
        centre = [Fraction(rng.randint(-16, 16), 16) for _ in range(n)]
        half = [rng.choice([Fraction(0), Fraction(1, 10), Fraction(1, 100), Fraction(1, 1000), Fraction(1, 10**4)])
                for _ in range(n)]
        lo = [c - r for c, r in zip(centre, half)]
        hi = [c + r for c, r in zip(centre, half)]
        ball = BallContext(128)
        with ball.scope():
            bvals = g.evaluate(ball, [ball.interval(a, b) for a, b in zip(lo, hi)])
        tm = TaylorContext(128, centre, half)
        try:
            with tm.scope():
                tvals = [v.range() for v in g.evaluate(tm, tm.inputs())]
            taylor_ok += 1
        except Undecided:  # a reciprocal's range reached 0 on a wide box: the search splits it
            tvals = None
        for pt in _points(rng, lo, hi, 6):
            ref = reference(doc, pt)
            finite += assert_encloses(ball, bvals, ref, f"trial {trial} ball")
            total += len(ref)
            if tvals is not None:
                assert assert_encloses(tm.ball, tvals, ref, f"trial {trial} taylor") == len(ref)
            with ball.scope():
                assert assert_encloses(ball, g.evaluate(ball, pt), ref, f"trial {trial} point") == len(ref)
    assert taylor_ok >= 25 and finite >= 0.9 * total


def test_random_hardmax_graphs_are_exact_at_points_and_enclosed_over_boxes():
    rng = random.Random(7)
    exact_points = 0
    for trial in range(30):
        doc = random_graph(rng, hardmax=True)
        g = graph_from_json(doc)
        n = g.input_count
        centre = [Fraction(rng.randint(-8, 8), 8) for _ in range(n)]
        half = [rng.choice([Fraction(0), Fraction(1, 1000), Fraction(1, 10**5)]) for _ in range(n)]
        lo = [c - r for c, r in zip(centre, half)]
        hi = [c + r for c, r in zip(centre, half)]
        ex = ExactContext()
        for pt in _points(rng, lo, hi, 3) + [centre]:
            ref = reference(doc, pt)
            got = _exact(g.evaluate(ex, pt))
            assert got == ref, f"trial {trial}"
            exact_points += 1
        for ctx_vals in _box_values(g, centre, half):
            if ctx_vals is None:
                continue  # an argmax the box does not decide (Undecided): never a guess
            ctx, vals = ctx_vals
            for pt in _points(rng, lo, hi, 3):
                assert_encloses(ctx, vals, reference(doc, pt), f"trial {trial}")
    assert exact_points == 30 * 6


def _box_values(g, centre, half):
    out = []
    ball = BallContext(128)
    try:
        with ball.scope():
            out.append((ball, g.evaluate(ball, [ball.interval(c - r, c + r) for c, r in zip(centre, half)])))
    except Undecided:
        out.append(None)
    tm = TaylorContext(128, centre, half)
    try:
        with tm.scope():
            out.append((tm.ball, [v.range() for v in g.evaluate(tm, tm.inputs())]))
    except Undecided:
        out.append(None)
    return out


# ------------------------------------------------------------------------------------------
# a hand-worked case and the extremes


def _one_head(tokens, mask=None, hardmax=False, scale="1", x_width=1):
    nd = {"name": "a", "op": "attention", "inputs": ["x"], "heads": 1, "Wq": [["1"]], "Wk": [["1"]],
          "Wv": [["1"]], "Wo": [["1"]], "scale": scale}
    if mask is not None:
        nd["mask"] = mask
    if hardmax:
        nd["hardmax"] = True
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": tokens, "width": x_width},
            "nodes": [nd], "output": "a"}


def test_hand_worked_two_tokens():
    """x = (0, 1), q = k = v = x, scale 1: query 0 scores (0, 0), so y_0 = (0 + 1)/2; query 1
    scores (0, 1), so y_1 = e / (1 + e) = 0.7310585786300049...  Causal: y_0 = 0 (it sees itself
    only).  The mask [[0, 1], [1, 0]]: each token sees the other, y = (1, 0).  Hardmax: query 0
    ties (1/2), query 1 takes token 1 (y_1 = 1), with any positive scale."""
    x = [Fraction(0), Fraction(1)]
    e = MP.e
    ball = BallContext(200)
    with ball.scope():
        y = graph_from_json(_one_head(2)).evaluate(ball, x)
        yc = graph_from_json(_one_head(2, mask="causal")).evaluate(ball, x)
        ym = graph_from_json(_one_head(2, mask=[[0, 1], [1, 0]])).evaluate(ball, x)
    assert ball.to_fraction_bounds(y[0]) == (Fraction(1, 2), Fraction(1, 2))  # exact zeros: a uniform row
    assert_encloses(ball, y, [Fraction(1, 2), e / (1 + e)])
    assert y[1].rad() < 2**-190 and abs(float(y[1].mid()) - 0.7310585786300049) < 1e-15
    assert_encloses(ball, yc, [Fraction(0), e / (1 + e)])
    assert [ball.to_fraction_bounds(v) for v in ym] == [(1, 1), (0, 0)]
    ex = ExactContext()
    assert _exact(graph_from_json(_one_head(2, hardmax=True)).evaluate(ex, x)) == [Fraction(1, 2), 1]
    assert _exact(graph_from_json(_one_head(2, hardmax=True, scale={"inv_sqrt": 2})).evaluate(ex, x)) == [Fraction(1, 2), 1]
    with pytest.raises(ExactUnsupported):  # a softmax is not rational
        graph_from_json(_one_head(2)).evaluate(ex, x)


def test_near_tied_scores_and_a_saturated_softmax():
    """Scores tied to 2^-100 give weights 1/2 -+ 2^-102 (resolved at 300 bits); scores 10^6 apart
    give weight 1 - e^(-10^6) on the top key: balls are finite and contain the reference, and the
    Taylor model over a box around the point too."""
    tiny = Fraction(1, 2**100)
    cases = [
        (_one_head(2, scale="1"), [Fraction(1), Fraction(1) + tiny]),       # query 0: scores 1, 1 + 2^-100
        (_one_head(3, scale="1000000"), [Fraction(1), Fraction(-1), Fraction(1, 2)]),  # scores 10^6 apart
        (_one_head(3, scale="1000000", mask="causal"), [Fraction(-2), Fraction(3), Fraction(-3)]),
    ]
    for doc, x in cases:
        g = graph_from_json(doc)
        ref = reference(doc, x)
        ball = BallContext(300)
        with ball.scope():
            vals = g.evaluate(ball, x)
        assert all(v.is_finite() and v.rad() < 2.0**-200 for v in vals)
        assert_encloses(ball, vals, ref)
        tm = TaylorContext(128, x, [Fraction(1, 10**6)] * len(x))
        with tm.scope():
            tvals = [v.range() for v in g.evaluate(tm, tm.inputs())]
        assert all(v.is_finite() for v in tvals)
        rng = random.Random(1)
        for pt in _points(rng, [a - Fraction(1, 10**6) for a in x], [a + Fraction(1, 10**6) for a in x], 5):
            assert_encloses(tm.ball, tvals, reference(doc, pt))
    # the saturated case: every query puts weight 1 - O(e^(-10^5)) on its top key (x = 1, -1, 1 for
    # the queries 1, -1, 1/2), and the balls are that narrow
    doc, x = cases[1]
    r = reference(doc, x)
    assert all(MP.almosteq(a, b, 2**-290) for a, b in zip(r, (1, -1, 1)))
    ball = BallContext(300)
    with ball.scope():
        vals = graph_from_json(doc).evaluate(ball, x)
    for v, want in zip(vals, (1, -1, 1)):
        lo, hi = ball.to_fraction_bounds(v)
        assert abs(lo - want) < Fraction(1, 2**250) and abs(hi - want) < Fraction(1, 2**250)


def test_hardmax_ties_are_averaged_exactly_and_an_undecided_tie_is_not_guessed():
    # x = (1, 1, 1, -1): query 0's scores (1, 1, 1, -1): three tied winners, y_0 = (1 + 1 + 1)/3 = 1;
    # with values from a second column the average is visible.
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 4, "width": 2},
           "nodes": [{"name": "a", "op": "attention", "inputs": ["x"], "heads": 1, "Wq": [["1", "0"]],
                      "Wk": [["1", "0"]], "Wv": [["0", "1"]], "Wo": [["1"]], "scale": "1/3", "hardmax": True}],
           "output": "a"}
    g = graph_from_json(doc)
    x = [Fraction(v) for v in (1, 5, 1, 7, 1, -3, -1, 100)]
    ex = ExactContext()
    got = _exact(g.evaluate(ex, x))
    assert got[0] == Fraction(5 + 7 - 3, 3) and got[3] == 100  # token 3 (x = -1) prefers itself: score 1
    assert got == reference(doc, x)
    ball = BallContext(64)
    with ball.scope():
        vals = g.evaluate(ball, x)  # the ties are exact balls: decided; the weights 1/3 rounded
    assert assert_encloses(ball, vals, got) == 4 and all(v.rad() < 2.0**-55 for v in vals)
    tm = TaylorContext(64, x, [Fraction(1, 100)] + [Fraction(0)] * 7)  # token 0's scores move: the tie is undecided
    with pytest.raises(Undecided), tm.scope():
        g.evaluate(tm, tm.inputs())


# ------------------------------------------------------------------------------------------
# PyTorch nn.MultiheadAttention in float64


def _torch_doc(m, E, h, N, L, batch_first, mask):
    F = lambda v: str(Fraction(float(v)))
    W, b = m.in_proj_weight.detach(), m.in_proj_bias.detach()
    nd = {"name": "a", "op": "attention", "inputs": ["x"], "heads": h,
          "Wq": [[F(v) for v in row] for row in W[:E]], "Wk": [[F(v) for v in row] for row in W[E:2 * E]],
          "Wv": [[F(v) for v in row] for row in W[2 * E:]],
          "bq": [F(v) for v in b[:E]], "bk": [F(v) for v in b[E:2 * E]], "bv": [F(v) for v in b[2 * E:]],
          "Wo": [[F(v) for v in row] for row in m.out_proj.weight.detach()],
          "bo": [F(v) for v in m.out_proj.bias.detach()],
          "scale": {"inv_sqrt": E // h}, "sequence_length": L,
          "layout": "batch_major" if batch_first else "sequence_major"}
    if mask is not None:
        nd["mask"] = mask
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": N * L, "width": E},
            "nodes": [nd], "output": "a"}


def _ours(doc, x):
    ball = BallContext(128)
    with ball.scope():
        return [float(v.mid()) for v in graph_from_json(doc).evaluate(ball, x)]


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("mask", [None, "causal", "matrix"])
def test_pytorch_multihead_attention_float64(batch_first, mask):
    torch.manual_seed(3)
    E, h, N, L = 6, 3, 2, 4
    m = torch.nn.MultiheadAttention(E, h, bias=True, batch_first=batch_first, dtype=torch.float64)
    with torch.no_grad():
        m.in_proj_bias.normal_()
        m.out_proj.bias.normal_()
    shape = (N, L, E) if batch_first else (L, N, E)
    X = torch.randn(*shape, dtype=torch.float64)
    attn_mask, ours_mask = None, None
    if mask == "causal":
        attn_mask = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)  # True: may NOT attend
        ours_mask = "causal"
    elif mask == "matrix":
        attn_mask = torch.tensor([[0, 1, 0, 1], [1, 0, 1, 1], [1, 1, 1, 0], [0, 0, 0, 1]], dtype=torch.bool)
        ours_mask = [[0 if v else 1 for v in row] for row in attn_mask.tolist()]
    with torch.no_grad():
        Y = m(X, X, X, attn_mask=attn_mask, need_weights=False)[0]
    x = [Fraction(float(v)) for v in X.reshape(-1)]  # memory order: rows are the flattened leading axes
    want = Y.reshape(-1).tolist()
    doc = _torch_doc(m, E, h, N, L, batch_first, ours_mask)
    got = _ours(doc, x)
    err = max(abs(a - b) for a, b in zip(got, want))
    assert err < 1e-12
    # the test fails on a tampered model: one weight, the scale, the layout, the mask
    tampered = []
    t = copy.deepcopy(doc)
    t["nodes"][0]["Wv"][2][1] = str(Fraction(t["nodes"][0]["Wv"][2][1]) + Fraction(1, 1024))
    tampered.append(t)
    t = copy.deepcopy(doc)
    t["nodes"][0]["scale"] = "1"
    tampered.append(t)
    t = copy.deepcopy(doc)
    t["nodes"][0]["layout"] = "sequence_major" if batch_first else "batch_major"
    tampered.append(t)
    t = copy.deepcopy(doc)
    t["nodes"][0]["mask"] = "causal" if mask is None else None
    tampered.append(t)
    for t in tampered:
        assert max(abs(a - b) for a, b in zip(_ours(t, x), want)) > 1e-6


def test_pytorch_without_biases_and_one_head():
    torch.manual_seed(5)
    E, N, L = 4, 3, 2
    m = torch.nn.MultiheadAttention(E, 1, bias=False, batch_first=True, dtype=torch.float64)
    X = torch.randn(N, L, E, dtype=torch.float64)
    with torch.no_grad():
        Y = m(X, X, X, need_weights=False)[0]
    F = lambda v: str(Fraction(float(v)))
    W = m.in_proj_weight.detach()
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": N * L, "width": E},
           "nodes": [{"name": "a", "op": "attention", "inputs": ["x"], "heads": 1,
                      "Wq": [[F(v) for v in r] for r in W[:E]], "Wk": [[F(v) for v in r] for r in W[E:2 * E]],
                      "Wv": [[F(v) for v in r] for r in W[2 * E:]],
                      "Wo": [[F(v) for v in r] for r in m.out_proj.weight.detach()],
                      "scale": {"inv_sqrt": E}, "sequence_length": L}],
           "output": "a"}
    got = _ours(doc, [Fraction(float(v)) for v in X.reshape(-1)])
    assert max(abs(a - b) for a, b in zip(got, Y.reshape(-1).tolist())) < 1e-12


# ------------------------------------------------------------------------------------------
# the box search over a graph whose output has other rows than its input


def test_bound_lays_out_a_changed_token_count():
    """Input [4, 1] (two sequences of 2, sequence-major); attention; concat with the input;
    mean over each sequence; select rows (1, 0, 1): the output is [3, 4], listed row by row,
    and the certified enclosure contains the reference at sampled points."""
    rng = random.Random(11)
    att, Eo = random_attention(rng, "a", "x", 1, 4)
    att.update(sequence_length=2, layout="sequence_major", mask=None, heads=1,
               Wq=[["1"]], Wk=[["1/2"]], Wv=[["1"]], Wo=[["1"], ["-1"], ["2"]], scale="1")
    for k in ("bq", "bk", "bv", "bo"):
        att.pop(k, None)
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 4, "width": 1},
           "nodes": [att, {"name": "c", "op": "concat", "inputs": ["a", "x"]},
                     {"name": "m", "op": "mean_tokens", "inputs": ["c"], "sequence_length": 2,
                      "layout": "sequence_major"},
                     {"name": "s", "op": "select_tokens", "inputs": ["m"], "indices": [1, 0, 1]}],
           "output": "s"}
    g = graph_from_json(doc)
    assert (g.out_tokens, g.out_width, g.output_count) == (3, 4, 12)
    assert g.tokens_of == {"x": 4, "a": 4, "c": 4, "m": 2, "s": 3}
    lo = [Fraction(-1, 2), Fraction(0), Fraction(1, 4), Fraction(1)]
    hi = [Fraction(-1, 4), Fraction(1, 8), Fraction(1, 2), Fraction(9, 8)]
    res = bound(g, lo, hi, split=2)
    assert len(res.lower) == 12 and res.shape == (4, 3)
    for pt in _points(rng, lo, hi, 20):
        for k, r in enumerate(reference(doc, pt)):
            assert res.lower[k] <= _frac(r) <= res.upper[k]
    # the rows really are the selected sequences: row 1 of the output is sequence 0's mean
    at = [Fraction(-1, 2), Fraction(0), Fraction(1, 4), Fraction(1)]
    ref = reference(doc, at)
    assert _frac(ref[3]) == (at[1] + at[3]) / 2 and _frac(ref[7]) == (at[0] + at[2]) / 2  # sequences (1, 3), (0, 2)


# ------------------------------------------------------------------------------------------
# the file


def test_round_trip_and_schema():
    rng = random.Random(3)
    for _ in range(10):
        doc = random_graph(rng, hardmax=rng.random() < 0.5)
        VALIDATOR.validate(doc)
        g = graph_from_json(doc)
        out = graph_to_json(g)
        VALIDATOR.validate(out)
        again = graph_from_json(out)
        assert [n.params for n in again.nodes] == [n.params for n in g.nodes]
        x = [Fraction(rng.randint(-4, 4), 4) for _ in range(g.input_count)]
        ball = BallContext(64)
        with ball.scope():
            a, b = g.evaluate(ball, x), again.evaluate(ball, x)
        assert all(u.mid() == v.mid() and u.rad() == v.rad() for u, v in zip(a, b))


def _att_doc():
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 4, "width": 2},
            "nodes": [{"name": "a", "op": "attention", "inputs": ["x"], "heads": 2,
                       "Wq": [["1", "0"], ["0", "1"]], "Wk": [["1", "1"], ["0", "1"]],
                       "Wv": [["1", "0"], ["1", "1"]], "Wo": [["1", "-1"]], "bo": ["1/2"],
                       "scale": {"inv_sqrt": 1}, "sequence_length": 2, "mask": [[1, 0], [1, 1]]},
                      {"name": "s", "op": "slice", "inputs": ["x"], "start": 0, "stop": 1},
                      {"name": "y", "op": "concat", "inputs": ["a", "s"]}],
            "output": "y"}


def _set(path, value):
    def change(d):
        obj = d
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
    return change


A = ("nodes", 0)


@pytest.mark.parametrize("change,needle", [
    (_set(A + ("heads",), 3), "not a multiple of the 3 heads"),
    (_set(A + ("Wq",), [["1", "0", "0"], ["0", "1", "0"]]), "expected a row of 2 numbers"),
    (_set(A + ("Wk",), [["1", "0"], ["0", "1"], ["1", "1"], ["0", "0"]]), "queries and keys share d_k"),
    (_set(A + ("Wo",), [["1", "-1", "0"]]), "the rows of Wv"),
    (_set(A + ("mask",), [[1, 0], [0, 0]]), "attends no key"),
    (_set(A + ("mask",), [[1, 0, 1], [1, 1, 1], [1, 1, 1]]), "list of 2 rows"),
    (_set(A + ("mask",), [[1, 2], [1, 1]]), "expected 0 or 1"),
    (_set(A + ("mask",), "anti-causal"), "mask"),
    (_set(A + ("sequence_length",), 3), "does not divide the input's 4 rows"),
    (_set(A + ("sequence_length",), 10**9), f"1..{MAX_SEQUENCE}"),
    (_set(A + ("scale",), "0"), "must be positive"),
    (_set(A + ("scale",), {"inv_sqrt": 0}), "inv_sqrt"),
    (_set(A + ("scale",), {"sqrt": 2}), "inv_sqrt"),
    (_set(A + ("scale",), 0.5), "numbers must be strings"),
    (_set(A + ("layout",), "heads_first"), "layout"),
    (_set(A + ("hardmax",), "yes"), "true or false"),
    (_set(A + ("bq",), ["0"]), "expected a list of 2 numbers"),
    (lambda d: d["nodes"][0].pop("scale"), "missing 'scale'"),
    (_set(("nodes", 1, "stop"), 3), "stop"),
    (_set(("nodes", 1, "start"), 1), "stop"),
    (lambda d: d["nodes"].append({"name": "t", "op": "select_tokens", "inputs": ["y"], "indices": [0, 4]}),
     "indices[1]: expected an integer in 0..3"),
    (lambda d: d["nodes"].append({"name": "t", "op": "select_tokens", "inputs": ["y"], "indices": [0] * 70000}),
     "1 to 65536"),
    (lambda d: d["nodes"].extend([{"name": "t", "op": "select_tokens", "inputs": ["y"], "indices": [0]},
                                  {"name": "u", "op": "concat", "inputs": ["t", "y"]}]), "inputs of 1 and 4 rows"),
    (lambda d: d["nodes"].extend([{"name": "t", "op": "mean_tokens", "inputs": ["y"]},
                                  {"name": "u", "op": "add", "inputs": ["t", "t"]},
                                  {"name": "v", "op": "add", "inputs": ["u", "y"]}]), "shapes differ"),
    (lambda d: d["nodes"].append({"name": "t", "op": "mean_tokens", "inputs": ["y"], "sequence_length": 3}),
     "does not divide"),
    (lambda d: (d.update(input={"name": "x", "tokens": 2048, "width": 2}), d["nodes"][0].pop("sequence_length"),
                d["nodes"][0].pop("mask")), "longer than the 1024"),
    (lambda d: d["nodes"].append({"name": "t", "op": "concat", "inputs": ["y"] * 600}), "more than the 1024"),
])
def test_bad_attention_files_are_one_line_exit_2(tmp_path, capsys, change, needle):
    doc = _att_doc()
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    box = ",".join(["0:1/10"] * 8)
    code, out, err = run_cli(capsys, "bound", str(path), f"--box={box}", "--quiet")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    with pytest.raises(GraphFileError):
        load_graph(str(path))


def test_the_good_file_is_bounded_by_the_command(tmp_path, capsys):
    path = tmp_path / "good.json"
    doc = _att_doc()
    path.write_text(json.dumps(doc))
    box = ",".join(["0:1/10"] * 8)
    code, out, err = run_cli(capsys, "bound", str(path), f"--box={box}", "--json", "--quiet", "--split=0")
    assert code == 0, err
    res = json.loads(out)
    assert res["shape"] == [2, 4] and len(res["lower"]) == 8
    x = [Fraction(1, 20)] * 8
    for k, r in enumerate(reference(doc, x)):
        assert Fraction(res["lower"][k]) <= _frac(r) <= Fraction(res["upper"][k])


def test_taylor_models_of_attention_are_first_order_tight():
    """The Taylor model of every output has as gradient the derivative at the centre (central
    differences of the 300-bit reference, step 2^-80), up to O(h^2) (exp's model is centred on its
    one-sided remainder); over a box of half-width 10^-3 its remainder is below a tenth of its
    linear part: the softmax keeps the correlation of its scores."""
    rng = random.Random(9)
    for trial in range(4):
        T, E = 4, 2
        nd, _ = random_attention(rng, "a", "x", E, T)
        nd.update(heads=2, Wq=_mat(rng, 4, E), Wk=_mat(rng, 4, E), Wv=_mat(rng, 2, E), Wo=_mat(rng, 2, 2),
                  scale={"inv_sqrt": 2})
        for b in ("bq", "bk", "bv", "bo"):
            nd.pop(b, None)
        doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": T, "width": E}, "nodes": [nd],
               "output": "a"}
        g = graph_from_json(doc)
        n = g.input_count
        centre = [Fraction(rng.randint(-8, 8), 8) for _ in range(n)]
        h = Fraction(1, 1000)
        tm = TaylorContext(128, centre, [h] * n)
        small = TaylorContext(128, centre, [Fraction(1, 10**6)] * n)
        with tm.scope():
            vals = g.evaluate(tm, tm.inputs())
            near = g.evaluate(small, small.inputs())
        step = Fraction(1, 2**80)
        grads = []
        for i in range(n):
            up = list(centre)
            dn = list(centre)
            up[i] += step
            dn[i] -= step
            grads.append([(_frac(a) - _frac(b)) / (2 * step) for a, b in zip(reference(doc, up), reference(doc, dn))])
        for k, (v, w) in enumerate(zip(vals, near)):
            lin = sum(abs(Fraction(float(gi.mid()))) for gi in v.g) * h
            for i, (gi, wi) in enumerate(zip(v.g, w.g)):
                assert abs(float(wi.mid()) - float(grads[i][k])) < 1e-9, (trial, k, i)
                assert abs(float(gi.mid()) - float(grads[i][k])) < 1e-5, (trial, k, i)
            rem = tm.ball.to_fraction_bounds(v.r)[1] if v.r is not None else 0
            assert lin > 0 and rem < lin / 10, (trial, k, float(rem), float(lin))


def test_mpmath_and_float_contexts_agree_with_the_reference():
    """The same node in mpmath at 300 bits (to 2^-250) and in float64 (to 10^-10) on random
    graphs: evidence contexts run the one formula too."""
    from symbounds.core.contexts import FPContext

    rng = random.Random(4)
    for _ in range(10):
        doc = random_graph(rng, hardmax=rng.random() < 0.3)
        g = graph_from_json(doc)
        x = [Fraction(rng.randint(-16, 16), 16) for _ in range(g.input_count)]
        ref = [_frac(v) for v in reference(doc, x)]
        mp = MPContext(300)
        for v, r in zip(g.evaluate(mp, x), ref):
            assert abs(_frac(v) - r) <= Fraction(1, 2**250) * (1 + abs(r))
        for v, r in zip(g.evaluate(FPContext(), x), ref):
            assert abs(v - float(r)) <= 1e-10 * (1 + abs(float(r)))


def test_the_one_step_dot_product_of_taylor_models_encloses_every_value():
    """``graph_tokens._dot_tm`` against the values ``sum_i (c_i + g_i d + e_i)(c'_i + g'_i d + e'_i)``
    at the corners ``d = +-h``, ``e = +-r`` (where, with aligned signs, the remainder bound is
    attained: every term of it is needed), and against the products summed by ``TM`` itself."""
    import itertools

    import flint

    from symbounds.core.graph_tokens import _dot_tm
    from symbounds.core.taylor import TM

    rng = random.Random(13)
    for trial in range(20):
        m = rng.randint(1, 3)
        h = Fraction(rng.randint(1, 8), 8)
        tm = TaylorContext(128, [Fraction(0)], [h])
        sign = 1 if trial % 2 else rng.choice([-1, 1])  # aligned signs: the bound is attained

        def model():
            c, gg, r = (Fraction(sign * rng.randint(0, 8), 8) for _ in range(3))
            kind = rng.random()
            g = None if kind < 0.2 else gg
            r = None if kind > 0.8 else abs(r)
            with tm.scope():
                return TM(tm, flint.arb(c.numerator) / c.denominator,
                          None if g is None else (flint.arb(g.numerator) / g.denominator,),
                          None if r is None else flint.arb(r.numerator) / r.denominator), (c, g or 0, r or 0)

        pairs = [(model(), model()) for _ in range(m)]
        a = [p[0][0] for p in pairs]
        b = [p[1][0] for p in pairs]
        with tm.scope():
            fused = _dot_tm(tm, a, b, [u.dev() for u in a], [v.dev() for v in b]).range()
            summed = a[0] * b[0]
            for u, v in zip(a[1:], b[1:]):
                summed = summed + u * v
        lo, hi = tm.ball.to_fraction_bounds(fused)
        slo, shi = tm.ball.to_fraction_bounds(summed.range())
        assert abs((hi - lo) - (shi - slo)) <= Fraction(1, 2**24) * (1 + shi - slo)  # the same bound (to Arb's radii)
        best = None
        for d in (-h, h):
            for es in itertools.product(*[(-1, 1)] * (2 * m)):
                val = Fraction(0)
                for i, ((_, (c, g, r)), (_, (c2, g2, r2))) in enumerate(pairs):
                    val += (c + g * d + es[2 * i] * r) * (c2 + g2 * d + es[2 * i + 1] * r2)
                assert lo <= val <= hi, (trial, float(val), float(lo), float(hi))
                best = val if best is None else max(best, val)
        if trial % 2:  # every sign aligned (all >= 0): the upper end is attained, up to an Arb radius's
            assert hi - best <= Fraction(1, 2**24) * (1 + abs(best))  # 30-bit rounding


def test_a_graph_built_in_python_gets_its_widths_and_rows():
    """An importer may build the nodes itself: ``Graph`` completes the widths and counts the rows."""
    from symbounds.core.graph import Graph, Node

    att = Node("a", "attention", ("x",), {"heads": 1, "Wq": ((Fraction(1), Fraction(0)),),
                                          "Wk": ((Fraction(0), Fraction(1)),), "Wv": ((Fraction(1), Fraction(1)),),
                                          "Wo": ((Fraction(1),), (Fraction(2),), (Fraction(-1),)),
                                          "scale": {"inv_sqrt": 1}, "mask": "causal", "sequence_length": 3})
    nodes = (att, Node("s", "slice", ("a",), {"start": 1, "stop": 3}), Node("c", "concat", ("s", "x"), {}),
             Node("t", "select_tokens", ("c",), {"indices": (5, 0)}))
    g = Graph("x", 6, 2, nodes, "t", {"x": 2})
    assert g.widths == {"x": 2, "a": 3, "s": 2, "c": 4, "t": 4} and (g.out_tokens, g.output_count) == (2, 8)
    doc = graph_to_json(g)
    VALIDATOR.validate(doc)
    x = [Fraction(rng) / 4 for rng in range(-6, 6)]
    ball = BallContext(128)
    with ball.scope():
        assert_encloses(ball, g.evaluate(ball, x), reference(doc, x))


# ------------------------------------------------------------------------------------------
# the softmax head in Taylor models: score differences, centred values, interval weights


def _old_softmax_head(ctx, scale, q, ql, scores, Ks, Vs):
    """The node's former Taylor-model head, written here: ``w = softmax(s)`` shifted by the top
    score's own model (two separately enclosed scores per difference), ``o = sum_k w_k v_k``."""
    from symbounds.core.evaluator import ScalarEvaluator
    from symbounds.core.graph_tokens import dot as _dot

    w = ScalarEvaluator(ctx).softmax([s * scale for s in scores])
    return [_dot(ctx, w, [v[a] for v in Vs]) for a in range(len(Vs[0]))]


def _taylor_ranges(g, centre, half):
    tm = TaylorContext(128, centre, half)
    with tm.scope():
        return tm, [v.range() for v in g.evaluate(tm, tm.inputs())]


def test_near_tied_masked_multi_head_boxes_enclose_the_reference(monkeypatch):
    """Random graphs whose tokens are nearly equal (so every row's scores are near-tied and the
    shift key ``m`` is undecided on the box), masks, 1-3 heads, boxes up to half-width 1/4 (where
    the interval softmax replaces weights): the Taylor ranges contain the 300-bit reference at
    sampled points and corners.  Replacements are counted, so the interval path is exercised."""
    from symbounds.core import graph_tokens

    hulls = []
    orig = graph_tokens._constant
    monkeypatch.setattr(graph_tokens, "_constant", lambda ctx, r: hulls.append(1) or orig(ctx, r))
    rng = random.Random(31)
    finite = total = 0
    for trial in range(30):
        doc = random_graph(rng)
        g = graph_from_json(doc)
        n = g.input_count
        base = Fraction(rng.randint(-8, 8), 8)
        centre = [base + Fraction(rng.randint(-2, 2), 1000) for _ in range(n)]
        half = [rng.choice([Fraction(0), Fraction(1, 1000), Fraction(1, 10), Fraction(1, 4)]) for _ in range(n)]
        try:
            tm, tvals = _taylor_ranges(g, centre, half)
        except Undecided:
            continue
        lo = [c - r for c, r in zip(centre, half)]
        hi = [c + r for c, r in zip(centre, half)]
        for pt in _points(rng, lo, hi, 4):
            ref = reference(doc, pt)
            finite += assert_encloses(tm.ball, tvals, ref, f"trial {trial}")
            total += len(ref)
    assert total >= 25 * 6 and finite >= 0.9 * total and len(hulls) > 0, (total, finite, len(hulls))


def test_the_interval_softmax_encloses_softmax_over_its_box():
    """``_interval_softmax`` against softmax at the corners and random points of the score box
    (300 bits), including scores 10^4 apart (no overflow) and a point box."""
    import flint

    from symbounds.core.graph_tokens import _interval_softmax

    rng = random.Random(5)
    for trial in range(40):
        n = rng.randint(1, 4)
        big = rng.choice([1, 10**4])
        lo = [Fraction(rng.randint(-8, 8), 4) * big for _ in range(n)]
        hi = [a + rng.choice([0, Fraction(1, 8), 1, 3]) for a in lo]
        rngs = [flint.arb(float(a)).union(flint.arb(float(b))) for a, b in zip(lo, hi)]
        for k in range(n):
            ball = _interval_softmax(rngs, k)
            for _ in range(6):
                x = [MP.mpf(float(a)) + (MP.mpf(float(b)) - MP.mpf(float(a))) * rng.random() for a, b in zip(lo, hi)]
                if _ == 0:
                    x = [MP.mpf(float(a if i == k else b)) for i, (a, b) in enumerate(zip(lo, hi))]  # a corner
                top = max(x)
                w = _frac(MP.exp(x[k] - top) / MP.fsum(MP.exp(v - top) for v in x))
                a_lo, a_hi = BallContext(128).to_fraction_bounds(ball)
                tol = Fraction(1, 2**250)
                assert a_lo - tol <= w <= a_hi + tol, trial


def test_hardmax_heads_are_untouched(monkeypatch):
    """The new head is for the softmax only: a hardmax graph's Taylor ranges are the same with the
    softmax head replaced by the old formula."""
    rng = random.Random(12)
    for trial in range(10):
        doc = random_graph(rng, hardmax=True)
        g = graph_from_json(doc)
        n = g.input_count
        centre = [Fraction(rng.randint(-8, 8), 8) for _ in range(n)]
        half = [Fraction(1, 10**5)] * n
        try:
            _, new = _taylor_ranges(g, centre, half)
        except Undecided:
            continue
        with monkeypatch.context() as mp:
            mp.setattr("symbounds.core.graph_tokens._softmax_head_tm", _old_softmax_head)
            _, old = _taylor_ranges(g, centre, half)
        assert all(a.mid() == b.mid() and a.rad() == b.rad() for a, b in zip(new, old)), trial


def _encoder_like():
    """Two heads of width 2 on 4 tokens of width 4 (scale 1/sqrt 2, biases), weights k/8."""
    rng = random.Random(44)
    nd = {"name": "a", "op": "attention", "inputs": ["x"], "heads": 2, "Wq": _mat(rng, 4, 4), "Wk": _mat(rng, 4, 4),
          "Wv": _mat(rng, 4, 4), "Wo": _mat(rng, 4, 4), "scale": {"inv_sqrt": 2},
          "bq": [_num(rng) for _ in range(4)], "bk": [_num(rng) for _ in range(4)],
          "bv": [_num(rng) for _ in range(4)], "bo": [_num(rng) for _ in range(4)]}
    doc = {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 4, "width": 4}, "nodes": [nd],
           "output": "a"}
    centre = [Fraction(rng.randint(-8, 8), 8) for _ in range(16)]
    return doc, centre


@pytest.mark.parametrize("half, factor", [(Fraction(1, 10), 0.5), (Fraction(1, 20), 0.95), (Fraction(1, 50), 1)])
def test_the_new_head_is_narrower_than_the_old_formula(monkeypatch, half, factor):
    """On an encoder-like node, the widest Taylor range with the score differences as one
    product, centred values and interval weights is narrower than the old formula's (computed
    here in the same run; by more than half at half-width 1/10, where the old weights are mostly
    remainder); both contain the reference."""
    doc, centre = _encoder_like()
    g = graph_from_json(doc)
    hs = [half] * len(centre)
    tm, new = _taylor_ranges(g, centre, hs)
    with monkeypatch.context() as mp:
        mp.setattr("symbounds.core.graph_tokens._softmax_head_tm", _old_softmax_head)
        _, old = _taylor_ranges(g, centre, hs)
    rng = random.Random(3)
    for pt in _points(rng, [c - half for c in centre], [c + half for c in centre], 4):
        ref = reference(doc, pt)
        assert assert_encloses(tm.ball, new, ref) == len(ref)
        assert assert_encloses(tm.ball, old, ref) == len(ref)
    wn, wo = max(float(v.rad()) for v in new), max(float(v.rad()) for v in old)
    assert wn < factor * wo, (wn, wo)
