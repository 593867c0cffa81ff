"""VNN-LIB properties: the reader (exact numbers, the unsafe region as a disjunction of
conjunctions) and the verifier (proved / refuted with a re-checked counterexample)."""

from fractions import Fraction

import pytest
from byon_helpers import data_path, load, reference

from symbounds.core.modelfile import model_from_json
from symbounds.core.vnnlib import SpecError, parse_vnnlib, verify

HEAD = "(declare-const X_0 Real)(declare-const Y_0 Real)(declare-const Y_1 Real)\n" \
       "(assert (>= X_0 -1/2))(assert (<= X_0 0.25))\n"


def test_reader_keeps_numbers_exact_and_normalises_constraints():
    spec = parse_vnnlib(HEAD + "(assert (or (and (<= Y_0 0.3) (>= (+ Y_0 (* -2 Y_1)) 1e-1)) (< Y_1 Y_0)))")
    assert spec.lo == (Fraction(-1, 2),) and spec.hi == (Fraction(1, 4),) and spec.outputs == 2
    a, b = spec.unsafe
    # Y_0 - 3/10 <= 0 ; -(Y_0 - 2 Y_1) + 1/10 <= 0 ; Y_1 - Y_0 < 0
    assert [(c.coeffs, c.const, c.strict) for c in a] == [
        (((0, Fraction(1)),), Fraction(-3, 10), False),
        (((0, Fraction(-1)), (1, Fraction(2))), Fraction(1, 10), False)]
    assert [(c.coeffs, c.const, c.strict) for c in b] == [(((0, Fraction(-1)), (1, Fraction(1))), 0, True)]


def test_top_level_output_constraints_join_every_alternative():
    spec = parse_vnnlib(HEAD + "(assert (<= Y_1 2))(assert (or (<= Y_0 0) (>= Y_0 1)))")
    assert len(spec.unsafe) == 2 and all(len(conj) == 2 for conj in spec.unsafe)


@pytest.mark.parametrize("text, words", [
    ("(declare-const X_0 Real)(assert (<= X_0 1))", "lower and an upper"),
    (HEAD + "(assert (<= (* Y_0 Y_1) 1))", "non-linear"),
    (HEAD + "(assert (<= (+ X_0 Y_0) 1))", "mixes inputs and outputs"),
    (HEAD + "(assert (<= Y_2 1))", "not declared"),
    (HEAD + "(assert (<= Y_0 1)", "unbalanced"),
    (HEAD + "(assert (<= Y_0 (exp 1)))", "unsupported term"),
    (HEAD + "(push 1)", "unsupported command"),
    ("(declare-const X_0 Real)(assert (>= X_0 1))(assert (<= X_0 0))", "empty"),
    (HEAD + "(assert (<= Y_0 __import__))", "neither a declared variable nor a number"),
])
def test_reader_rejects_what_it_does_not_support(text, words):
    with pytest.raises(SpecError, match=words):
        parse_vnnlib(text)


def test_property_that_holds_is_proved():
    model = model_from_json(load("residual_model.json"))
    with open(data_path("holds.vnnlib")) as f:
        spec = parse_vnnlib(f.read())
    res = verify(model, spec)
    assert res.verdict == "proved" and res.counterexample is None


def test_property_that_fails_is_refuted_with_a_counterexample_that_rechecks():
    mj = load("residual_model.json")
    with open(data_path("fails.vnnlib")) as f:
        spec = parse_vnnlib(f.read())
    res = verify(model_from_json(mj), spec)
    assert res.verdict == "refuted"
    x = [Fraction(v) for v in res.counterexample["x"]]
    assert all(0 <= v <= 1 for v in x)
    y = reference(mj, x)[0]  # independent 300-bit evaluation
    assert 2.25 <= y <= 10


def test_token_model_with_a_linear_combination_of_outputs():
    mj = load("token_model.json")
    decl = "".join(f"(declare-const X_{i} Real)(assert (>= X_{i} 0))(assert (<= X_{i} 1/4))" for i in range(4))
    decl += "".join(f"(declare-const Y_{j} Real)" for j in range(4))
    # Z[0,1] - Z[0,0] (Y_2 - Y_0): sampled values decide a true and a false threshold
    import random
    rng = random.Random(0)
    vals = []
    for _ in range(200):
        x = [Fraction(rng.randrange(0, 257), 1024) for _ in range(4)]
        out = reference(mj, x)
        vals.append(out[2] - out[0])
    top = max(vals)
    false_spec = parse_vnnlib(decl + f"(assert (>= (- Y_2 Y_0) {float(top) - 0.01!r}))")
    res = verify(model_from_json(mj), false_spec)
    assert res.verdict == "refuted"
    out = reference(mj, [Fraction(v) for v in res.counterexample["x"]])
    assert out[2] - out[0] >= top - 0.01
    true_spec = parse_vnnlib(decl + f"(assert (>= (- Y_2 Y_0) {float(top) + 0.5!r}))")
    assert verify(model_from_json(mj), true_spec).verdict == "proved"


def test_output_count_must_match_the_model():
    spec = parse_vnnlib(HEAD.replace("(assert (>= X_0 -1/2))(assert (<= X_0 0.25))", "")
                        .replace("(declare-const X_0 Real)", "(declare-const X_0 Real)(declare-const X_1 Real)")
                        + "(assert (and (>= X_0 0) (<= X_0 1) (>= X_1 0) (<= X_1 1)))(assert (<= Y_1 0))")
    with pytest.raises(SpecError, match="outputs"):
        verify(model_from_json(load("residual_model.json")), spec)


def test_deep_nesting_is_one_line():
    deep = "(+ " * 5000 + "Y_0" + ")" * 5000
    with pytest.raises(SpecError, match="nested too deeply"):
        parse_vnnlib(HEAD + f"(assert (<= {deep} 1))")
