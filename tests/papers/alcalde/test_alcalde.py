"""Exact sequence interpolation [AFZ25]: datasets, each stage, whole constructions, tampering.

Expected values are worked out by hand in the comments (or checked against the targets the test
itself wrote down), never captured from the code under test.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from fractions import Fraction as F

import pytest

from symbounds.core.contexts import ExactContext
from symbounds.core.transformer import Attention, FeedForward, Head, Transformer, forward
from symbounds.papers.alcalde import construction as al
from symbounds.papers.alcalde.dataset import (
    Dataset,
    DatasetError,
    core_dataset,
    dataset_from_json,
    dataset_to_json,
    load_dataset,
    random_dataset,
)
from symbounds.papers.alcalde.evaluate import evaluate, output_set


def P(*a):
    return tuple(F(x) for x in a)


def run_generic(model, X):
    """Output set of one sequence through the generic exact forward pass (tokens as columns)."""
    d = len(X[0])
    Z = forward(ExactContext(), model, [[x[k] for x in X] for k in range(d)])
    return {tuple(F(int(Z[k][t].p), int(Z[k][t].q)) for k in range(d)) for t in range(len(Z[0]))}


def run_fast(model, X):
    (s,), _ = evaluate(model, [X])
    return output_set(s)


def one_layer(layer):
    return Transformer((layer,), None, None, "tokens")


# ------------------------------------------------------------------------------------------
# datasets


def test_dataset_json_reads_numbers_exactly(tmp_path):
    path = tmp_path / "ds.json"
    # 0.1 as a JSON number is read from its decimal text: exactly 1/10
    path.write_text('{"d": 2, "sequences": [{"input": [[0.1, "1/3"], [2, "-0.5"]], "target": [["1e-2", 0]]}]}')
    ds = load_dataset(str(path))
    assert ds.inputs[0] == ((F(1, 10), F(1, 3)), (F(2), F(-1, 2)))
    assert ds.targets[0] == ((F(1, 100), F(0)),)
    assert dataset_from_json(json.loads(json.dumps(dataset_to_json(ds)))) == ds


@pytest.mark.parametrize("data, words", [
    ({"d": 1, "sequences": [{"input": [[1]], "target": [[1]]}]}, ["d"]),
    ({"d": 2, "sequences": [{"input": [[1, 2], [1, 2]], "target": [[0, 0]]}]}, ["sequence 0", "tokens 0 and 1"]),
    ({"d": 2, "sequences": [{"input": [[1, 2]], "target": [[0, 0]]},
                            {"input": [[1, 2], [3, 4]], "target": [[0, 0], [0, 0]]}]},
     ["sequence 1", "targets 0 and 1"]),
    ({"d": 2, "sequences": [{"input": [[1, 2]], "target": [[0, 0], [1, 1]]}]}, ["sequence 0", "m_j <= n_j"]),
    ({"d": 2, "sequences": [{"input": [[1, 2], [3, 4]], "target": [[0, 0]]},
                            {"input": [[3, 4], [1, 2]], "target": [[1, 1]]}]}, ["sequence 1", "sequence 0"]),
    ({"d": 2, "sequences": [{"input": [[1, "x"]], "target": [[0, 0]]}]}, ["sequence 0", "token 0", "coordinate 1"]),
    ({"d": 2, "sequences": [{"input": [[1, 2, 3]], "target": [[0, 0]]}]}, ["sequence 0", "token 0"]),
    ({"d": 2, "sequences": [{"input": [[1, "1/0"]], "target": [[0, 0]]}]}, ["division by zero"]),
    ({"d": 2, "sequences": []}, ["sequences"]),
])
def test_invalid_datasets_rejected_with_one_line(data, words):
    with pytest.raises(DatasetError) as e:
        dataset_from_json(data)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg


def test_nan_and_bad_json_rejected(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"d": 2, "sequences": [{"input": [[NaN, 1]], "target": [[0, 0]]}]}')
    with pytest.raises(DatasetError, match="NaN"):
        load_dataset(str(path))
    path.write_text("{")
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_dataset(str(path))


def test_random_generator_is_seeded_and_shares_tokens():
    a = random_dataset(6, 20, 3, 3, seed=5)
    assert a == random_dataset(6, 20, 3, 3, seed=5)
    assert a != random_dataset(6, 20, 3, 3, seed=6)
    assert len(set(a.n)) > 1  # different lengths
    sets = [set(X) for X in a.inputs]
    assert any(sets[i] & sets[j] for i in range(6) for j in range(i))  # shared tokens
    assert all(1 <= m <= 3 for m in a.m)


# ------------------------------------------------------------------------------------------
# the stages, one layer at a time, on hand-made configurations


def test_lemma_4_1_rank_one_collapses_onto_two_extremes():
    # A = v v^T with v = (1, 0), V = I, rho = 0 (Fig. 4a).  v.x = 1, 2, -1, -3: tokens with
    # v.x > 0 attend to the v-maximum (2, 0), tokens with v.x < 0 to the v-minimum (-3, 1).
    v = ((1, 0),)
    layer = Attention((Head(v, v, al._eye(2), al._eye(2)),), "hardmax", 0)
    X = [P(1, 5), P(2, 0), P(-1, 3), P(-3, 1)]
    for run in (run_generic, run_fast):
        assert run(one_layer(layer), X) == {P(2, 0), P(-3, 1)}


def test_lemma_4_2_and_4_3_collapse_to_leader_keeps_sphere_points():
    # A = I, V = I, rho = 0 (Fig. 4b, 4c).  Box tokens (1,2), (2,1), (3,3) and leader (10,10):
    # <x, (10,10)> = 30, 30, 60 beat <x, x_l> <= 18 for box tokens; sphere points of radius 5 in the
    # negative quadrant score 25 with themselves, < 25 with each other, < 0 with positive points.
    X = [P(1, 2), P(2, 1), P(3, 3), P(10, 10), P(-3, -4), P(-4, -3)]
    layer = al.collapse_attention(2)
    for run in (run_generic, run_fast):
        assert run(one_layer(layer), X) == {P(10, 10), P(-3, -4), P(-4, -3)}


def test_separation_attention_translates_by_each_sequences_maximum():
    # Fig. 6: v = (1, 1), gamma = 1, rho = 1.  X1 = {(1,1), (2,3)} has v-maximum (2,3);
    # X2 = {(1,1), (3,1)} has v-maximum (3,1).  X1 -> {(3,4), (4,6)}, X2 -> {(4,2), (6,2)}:
    # the shared token (1,1) is no longer shared.
    model = one_layer(al.separation_attention(2, (1, 1), 1))
    X1, X2 = [P(1, 1), P(2, 3)], [P(1, 1), P(3, 1)]
    for run in (run_generic, run_fast):
        assert run(model, X1) == {P(3, 4), P(4, 6)}
        assert run(model, X2) == {P(4, 2), P(6, 2)}


def test_hat_move_moves_one_point_only():
    # w = (1, 0), s = 1, eps = 1, Delta = (10, 0): (1,2) -> (11,2); projections 3 and 0 are at
    # distance >= eps from s, so (3,5) and (0,7) stay.
    units = al._hat_units((1, 0), 1, 1, (10, 0))
    ff = al._ff_layer(2, al._Frame(1, (0, 0)), units)
    X = [P(1, 2), P(3, 5), P(0, 7)]
    for run in (run_generic, run_fast):
        assert run(one_layer(ff), X) == {P(11, 2), P(3, 5), P(0, 7)}
    assert len(ff.W1) <= 4


def test_first_layer_rescales_to_an_integer_frame():
    # z = 4 x + (1, 1): (1/4, 0) -> (2, 1), (0, 1/2) -> (1, 3)
    ff = al._ff_layer(2, al._Frame(4, (1, 1)), [])
    assert run_generic(one_layer(ff), [P("1/4", 0), P(0, "1/2")]) == {P(2, 1), P(1, 3)}


def test_sphere_points_are_integer_points_of_one_circle():
    for count in (1, 2, 7, 40):
        R0, pts = al.sphere_points(count)
        assert len(pts) == count == len(set(pts))
        assert all(a > 0 and b > 0 and a * a + b * b == R0 * R0 for a, b in pts)


# ------------------------------------------------------------------------------------------
# whole constructions on hand-made datasets

A, B, C = P(0, 0), P(1, 0), P(0, 1)
NO_PRIVATE = Dataset(2, ((A, B), (A, C), (B, C)),
                     ((P(5, 5), P(-1, 2)), (P("1/3", 7), P(6, 6)), (P(8, 8), P(0, 0))))


@pytest.mark.parametrize("variant", ["plain", "compressed"])
def test_no_private_token_dataset(variant):
    # X1 = {a,b}, X2 = {a,c}, X3 = {b,c}: no token is private, every sequence needs 2 outputs.
    con = al.build(NO_PRIVATE, variant)
    assert con.K >= 1
    for j, X in enumerate(NO_PRIVATE.inputs):
        assert run_generic(con.model, X) == set(NO_PRIVATE.targets[j])
    # after separation the three sequences share nothing (each needs both of its tokens)
    sep = con.stages["separation"]
    trunc = Transformer(con.model.layers[:sep], None, None, "tokens")
    outs = [run_generic(trunc, X) for X in NO_PRIVATE.inputs]
    assert all(not (outs[i] & outs[j]) for i in range(3) for j in range(i))
    claims, exact = al.verify(con, evaluator="generic")
    assert exact and all(c.verdict == "proved" for c in claims)
    assert con.blocks <= 2 * 6 + 3 - 1


def test_stages_of_a_small_dataset_by_hand():
    # two sequences, one shared token; m = (1, 2)
    ds = Dataset(2, ((P(0, 0), P(1, 1)), (P(0, 0), P(2, 0), P(0, 3))),
                 ((P(7, 7),), (P(1, 2), P(3, 4))))
    con = al.build(ds)
    layers = con.model.layers
    upto = lambda i: Transformer(layers[:i], None, None, "tokens")
    # after leader selection and the collapse: sequence j holds exactly its leader and sphere points
    for j, X in enumerate(ds.inputs):
        assert run_generic(upto(con.stages["collapse"]), X) == {con.leaders[j], *con.sphere[j]}
        assert run_generic(con.model, X) == set(ds.targets[j])
    assert len(con.sphere[0]) == 0 and len(con.sphere[1]) == 1
    # leaders lie beyond the box, sphere points in the closed negative quadrant
    assert all(min(L) > 3 for L in con.leaders)
    assert all(max(s) <= 0 and min(s) < 0 for s in con.sphere[1])
    # sizes: K = 0 (both own enough private tokens), L = 2M = 6, width 4
    assert con.K == 0 and con.blocks == 6
    assert al.width(con.model) <= 4


# ------------------------------------------------------------------------------------------
# random datasets, proved exact


@pytest.mark.parametrize("N, n, d, m, seed", [
    (3, 5, 2, 2, 0), (5, 8, 3, 3, 1), (4, 6, 16, 2, 2),
])
def test_random_small_generic(N, n, d, m, seed):
    ds = random_dataset(N, n, d, m, seed=seed, share=F(1, 2))
    for variant in ("plain", "compressed"):
        con = al.build(ds, variant, seed=seed)
        for j, X in enumerate(ds.inputs):
            assert run_generic(con.model, X) == set(ds.targets[j])


@pytest.mark.parametrize("N, n, d, m, seed", [
    (20, 50, 2, 3, 0), (20, 50, 3, 4, 1), (20, 50, 16, 3, 2), (12, 30, 2, 1, 3),
])
@pytest.mark.parametrize("variant", ["plain", "compressed"])
def test_random_datasets_proved_exact(N, n, d, m, seed, variant):
    ds = random_dataset(N, n, d, m, seed=seed, share=F(2, 3))
    con = al.build(ds, variant, seed=seed)
    claims, exact = al.verify(con)
    assert exact
    assert all(c.verdict == "proved" for c in claims), [(c.id, c.note) for c in claims if c.verdict != "proved"]
    M = sum(ds.m)
    assert con.blocks <= 2 * M + N - 1
    if variant == "compressed":
        assert con.blocks == con.K + M + -(-M // 4)
    # the verifier's verdict agrees with a direct comparison against the targets written above
    finals, _ = evaluate(con.model, ds.inputs)
    assert all(output_set(s) == set(Y) for s, Y in zip(finals, ds.targets))


@pytest.mark.parametrize("d", [2, 3, 16])
def test_core_datasets_need_separation(d):
    # a common core shared by every sequence, one own token each, m_j = 2: separation must split
    ds = core_dataset(8, 6, d, 2, seed=d)
    con = al.build(ds)
    assert 1 <= con.K <= ds.N - 1
    claims, exact = al.verify(con)
    assert exact and all(c.verdict == "proved" for c in claims)


# ------------------------------------------------------------------------------------------
# tampered models are refuted


def _tamper(model, i, **changes):
    layers = list(model.layers)
    layers[i] = replace(layers[i], **changes)
    return Transformer(tuple(layers), None, None, "tokens")


def _bump(mat, r, c, by=1):
    rows = [list(row) for row in mat]
    rows[r][c] = F(rows[r][c]) + by
    return tuple(tuple(row) for row in rows)


def test_tampered_models_refuted():
    con = al.build(NO_PRIVATE)
    st = con.stages
    last_ff = len(con.model.layers) - 2
    collapse = st["collapse"] - 1
    sep_sa = 1
    head = con.model.layers[collapse].heads[0]
    sep_head = con.model.layers[sep_sa].heads[0]
    tampered = [
        # an interpolation hat moves its point by a different amount
        _tamper(con.model, last_ff, W2=_bump(con.model.layers[last_ff].W2, 0, 0)),
        # a hidden bias shifted: the hat is no longer centred on its point
        _tamper(con.model, last_ff, b1=tuple(F(b) + (1 if k == 1 else 0) for k, b in enumerate(con.model.layers[last_ff].b1))),
        # the collapse's value matrix is no longer I
        _tamper(con.model, collapse, heads=(replace(head, W_V=_bump(head.W_V, 0, 0)),)),
        # the separation shift gamma changed in one coordinate
        _tamper(con.model, sep_sa, heads=(replace(sep_head, W_V=_bump(sep_head.W_V, 1, 1)),)),
        # the collapse keeps a residual
        _tamper(con.model, collapse, skip=1),
    ]
    for bad in tampered:
        for ev in ("fast", "generic"):
            claims, exact = al.verify(con, bad, evaluator=ev)
            assert not exact
            assert next(c for c in claims if c.id == "I1").verdict == "refuted"
        # an independent look: some sequence misses its targets
        assert any(run_generic(bad, X) != set(Y) for X, Y in zip(NO_PRIVATE.inputs, NO_PRIVATE.targets))


# ------------------------------------------------------------------------------------------
# the fast evaluator agrees with the generic forward pass


def _random_hardmax_model(rng, d, layers):
    small = lambda: rng.choice([-2, -1, 0, 0, 1, 2, F(1, 2)])
    mat = lambda r, c: tuple(tuple(small() for _ in range(c)) for _ in range(r))
    out = []
    for i in range(layers):
        if i % 2 == 0:
            h = rng.randint(1, 4)
            out.append(FeedForward(mat(h, d), tuple(small() for _ in range(h)), mat(d, h), tuple(small() for _ in range(d)),
                                   rng.choice([0, 1, 2])))
        else:
            heads = []
            for _ in range(rng.randint(1, 2)):
                dk = rng.choice([1, 1, 2, d])
                heads.append(Head(mat(dk, d), mat(dk, d), mat(d, d), mat(d, d)))
            out.append(Attention(tuple(heads), "hardmax", rng.choice([0, 1]), rng.choice([None, F(1, 2), -1])))
    return Transformer(tuple(out), None, None, "tokens")


def _multiset_generic(model, X):
    d = len(X[0])
    Z = forward(ExactContext(), model, [[x[k] for x in X] for k in range(d)])
    out: dict = {}
    for t in range(len(Z[0])):
        r = tuple(F(int(Z[k][t].p), int(Z[k][t].q)) for k in range(d))
        out[r] = out.get(r, 0) + 1
    return out


def _multiset_fast(model, X):
    (s,), _ = evaluate(model, [X])
    out: dict = {}
    from symbounds.papers.alcalde.evaluate import state_points

    for r, c in zip(state_points(s), s.counts):
        out[r] = out.get(r, 0) + c
    return out


@pytest.mark.parametrize("seed", range(12))
def test_fast_evaluator_equals_generic_on_random_models(seed):
    rng = random.Random(seed)
    d = rng.choice([2, 3])
    model = _random_hardmax_model(rng, d, rng.randint(2, 6))
    X = list({tuple(F(rng.randint(-3, 3)) for _ in range(d)) for _ in range(6)})
    assert _multiset_fast(model, X) == _multiset_generic(model, X)


def test_fast_evaluator_equals_generic_on_constructions():
    ds = random_dataset(4, 7, 3, 3, seed=11, share=F(1, 2))
    con = al.build(ds)
    cps = tuple(range(len(con.model.layers) + 1))
    fast, fsnaps = al.evaluate_sets(con.model, ds, cps, "fast")
    gen, gsnaps = al.evaluate_sets(con.model, ds, cps, "generic")
    assert fast == gen
    assert fsnaps == gsnaps


# ------------------------------------------------------------------------------------------
# softmax: Arb balls + the exact piecewise-linear argument

from symbounds.core.contexts import BallContext  # noqa: E402
from symbounds.papers.alcalde import softmax as sm  # noqa: E402
from symbounds.papers.alcalde.dataset import authors_dataset  # noqa: E402


@pytest.mark.parametrize("ds", [NO_PRIVATE, random_dataset(4, 6, 3, 2, seed=4, share=F(1, 2)),
                                core_dataset(4, 4, 2, 2, seed=1)])
def test_softmax_certified_exact(ds):
    con = sm.build_softmax(ds, F(1, 64))
    claims, exact, info = sm.certify_softmax(con)
    assert exact and all(c.verdict == "proved" for c in claims)
    assert info["tau"] == "1/64"
    assert con.blocks == con.K + 2 * ds.M + 1 <= 2 * ds.M + ds.N
    assert all(isinstance(layer, FeedForward) or layer.kind == "softmax" for layer in con.model.layers)


def test_softmax_line_layer_flattens_onto_the_line():
    # by hand: after the line layer every token is (o_1 + t, 0, ..., 0) with t > 0
    con = sm.build_softmax(NO_PRIVATE, F(1, 64))
    ctx = BallContext(256)
    o = con.notes["o"]
    for X in NO_PRIVATE.inputs:
        Z = sm.ball_forward(ctx, con.model, X, con.stages["line"])
        for z in Z:
            assert ctx.is_zero(z[1])
            assert ctx.lt(ctx.convert(o[0]), z[0])


def test_softmax_large_tau_not_certified():
    # at tau = 10^6 the softmax averages whole sequences: the clusters do not form
    con = sm.build_softmax(NO_PRIVATE, F(10**6))
    claims, exact, _ = sm.certify_softmax(con, max_prec=512)
    assert not exact
    assert next(c for c in claims if c.id == "I1").verdict in ("refuted", "undecided")


def test_softmax_tampered_refuted():
    con = sm.build_softmax(NO_PRIVATE, F(1, 64))
    i = len(con.model.layers) - 2  # the last snap layer
    bad = _tamper(con.model, i, W2=_bump(con.model.layers[i].W2, 1, 0))
    claims, exact, _ = sm.certify_softmax(con, model=bad)
    assert not exact
    assert next(c for c in claims if c.id == "X2").verdict == "refuted"
    assert next(c for c in claims if c.id == "I1").verdict != "proved"


def test_softmax_ball_evaluator_encloses_generic_forward():
    # the generic forward pass in Arb and our evaluator both enclose the true value: they overlap
    con = sm.build_softmax(NO_PRIVATE, F(1, 4))
    ctx = BallContext(128)
    for X in NO_PRIVATE.inputs:
        ours = sm.ball_forward(ctx, con.model, X)
        Zg = forward(ctx, con.model, [[x[k] for x in X] for k in range(2)])
        with ctx.scope():
            for t, z in enumerate(ours):
                for k in range(2):
                    assert z[k].overlaps(Zg[k][t])


def test_authors_dataset_shape():
    ds = authors_dataset(2, 5, 3, seed=1)
    assert ds.N == 2 and ds.m == [1, 1] and ds.n == [5, 5] and ds.d == 3
    assert all(0 <= v <= 1 for X in ds.inputs for x in X for v in x)
    assert all(isinstance(v, F) for Y in ds.targets for y in Y for v in y)
    assert authors_dataset(2, 5, 3, seed=1) == ds


# ------------------------------------------------------------------------------------------
# orchestration

from symbounds.app.report import interp_json, interp_text  # noqa: E402
from symbounds.papers.alcalde import run as interp  # noqa: E402


def test_interp_run_json_and_text():
    ds = random_dataset(4, 6, 2, 2, seed=2)
    res = interp.run(ds, interp.InterpOptions(variant="plain"))
    j = interp_json(res)
    assert j["exact"] is True and j["verdict"] == "proved" and res.exit_code == 0
    assert j["dataset"] == {"N": 4, "d": 2, "n_j": ds.n, "m_j": ds.m}
    for key in ("blocks", "blocks_formula", "width", "params_dense", "params_nonzero", "theta_norm_sq", "claims"):
        assert key in j
    assert j["blocks"] == j["blocks_formula"]["K"] + 2 * ds.M
    # ||theta*||^2 is the exact sum of squares of the weights, walked here layer by layer
    theta = F(j["theta_norm_sq"])
    sq = lambda m: sum(F(v) ** 2 for row in m for v in row)
    expected = F(0)
    for layer in res.model.layers:
        if hasattr(layer, "heads"):
            expected += sum(sq(h.W_Q) + sq(h.W_K) + sq(h.W_V) + sq(h.W_O) for h in layer.heads)
        else:
            expected += sq(layer.W1) + sq(layer.W2) + sq([layer.b1]) + sq([layer.b2])
    assert theta == expected
    assert F(j["regularisation"][0]["loss_bound"]) == theta / 10
    text = interp_text(res)
    assert "verdict: proved" in text and "2M + 2N + 1" in text
    soft = interp.run(ds, interp.InterpOptions(attention="softmax", tau=F(1, 32)))
    js = interp_json(soft)
    assert js["exact"] is True and js["tau"] == "1/32"


def _rerun_with_fractions(path, X):
    """The README's few lines (executed from the README itself): re-run an exported hardmax model
    with Python's fractions only."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    m = re.search(r"<!-- readme-snippet: fractions-rerun -->\s*```python\n(.*?)```", readme, re.S)
    assert m, "README lost its fractions snippet"
    namespace = {}
    exec(compile(m.group(1), "README.md", "exec"), namespace)  # our own README, not user input
    return namespace["rerun"](path, X)


def test_exported_model_reruns_with_plain_fractions(tmp_path):
    from symbounds.core.modelfile import export_model, load_model

    con = al.build(NO_PRIVATE, "compressed")
    path = tmp_path / "model.json"
    export_model(con.model, str(path))
    data = json.loads(path.read_text())
    assert data["input"] == "tokens" and "embedding" not in data
    assert all(isinstance(v, str) for L in data["layers"] if L["type"] == "ffn" for row in L["W2"] for v in row)
    for X, Y in zip(NO_PRIVATE.inputs, NO_PRIVATE.targets):
        assert _rerun_with_fractions(str(path), X) == set(Y)
    again = load_model(str(path))
    claims, exact = al.verify(con, again)
    assert exact


# ------------------------------------------------------------------------------------------
# command line


def test_cli_interp(tmp_path, capsys):
    from symbounds.app.cli import main

    data = tmp_path / "ds.json"
    data.write_text(json.dumps(dataset_to_json(NO_PRIVATE)))
    assert main(["interp", "--data", str(data), "--json", "--export", str(tmp_path / "m.json")]) == 0
    j = json.loads(capsys.readouterr().out)
    assert j["exact"] is True and j["dataset"]["n_j"] == [2, 2, 2]
    for X, Y in zip(NO_PRIVATE.inputs, NO_PRIVATE.targets):
        assert _rerun_with_fractions(str(tmp_path / "m.json"), X) == set(Y)
    assert main(["interp", "--random", "3,5,2,2", "--attention", "softmax", "--tau", "1/8", "--quiet"]) == 0
    assert "verdict: proved" in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["interp", "--random", "3,5,1,2"], "2 <= d"),
    (["interp", "--random", "3,5"], "four positive integers"),
    (["interp", "--random", "3,5,2,2", "--tau", "1"], "softmax only"),
    (["interp", "--random", "3,5,2,2", "--attention", "softmax", "--tau", "-1"], "positive"),
    (["interp"], "--data"),
])
def test_cli_interp_bad_input(argv, words, capsys):
    from symbounds.app.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1


def test_cli_interp_bad_dataset(tmp_path, capsys):
    from symbounds.app.cli import main

    path = tmp_path / "bad.json"
    path.write_text('{"d": 2, "sequences": [{"input": [[1, 2], [3, 4]], "target": [[0, 0], [0, 0]]}]}')
    assert main(["interp", "--data", str(path)]) == 2
    assert "sequence 0: targets 0 and 1 are equal" in capsys.readouterr().err


@pytest.mark.parametrize("ds", [
    Dataset(2, ((A,),), ((P(1, 1),),)),  # one sequence, one token
    # nested sequences: {a,b,c,e} > {a,b,c} > {a,b} > {a}, no private token except e
    Dataset(2, ((A, B, C, P("1/3", "-5/7")), (A, B, C), (A, B), (A,)),
            ((P(1, 1), P(2, 2), P(5, 5), P(0, 0)), (P(1, 1), P(2, 2), P(3, 3)), (P(9, 9), P(1, 1)), (P(4, 4),))),
    # targets equal to inputs, shared between sequences
    Dataset(3, ((P(1, 2, 3), P(3, 2, 1)), (P(3, 2, 1), P(1, 2, 3), P(2, 2, 2))),
            ((P(1, 2, 3), P(3, 2, 1)), (P(3, 2, 1), P(1, 2, 3), P(2, 2, 2)))),
])
def test_edge_datasets(ds):
    for variant in ("plain", "compressed"):
        con = al.build(ds, variant)
        for X, Y in zip(ds.inputs, ds.targets):
            assert run_generic(con.model, X) == set(Y)
    con = sm.build_softmax(ds)
    assert sm.certify_softmax(con)[1]
