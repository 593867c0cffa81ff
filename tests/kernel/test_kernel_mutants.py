"""The checker kernel: tests added for the survivors of its third mutation run
(docs/mutation-testing.md, "The checker kernel"), each compared with a hand-worked value."""

from fractions import Fraction

import pytest
from flint import arb

from symbounds_kernel import property as kp
from symbounds_kernel.read import Rejected
from symbounds_kernel.target import evaluate, parse

F = Fraction


# ------------------------------------------------------------------------------------------
# target.parse and target.evaluate


def test_a_target_of_exactly_1000_characters_is_read_and_one_more_is_refused():
    text = "x1" + " " * 996 + "+0"
    assert len(text) == 1000 and evaluate(parse(text, 1), [arb(3)]) == 3
    for bad in (text + " ", None, 7):
        with pytest.raises(Rejected, match=r"^target: not a string of at most 1000 characters$"):
            parse(bad, 1)


def test_integer_powers_up_to_1000_are_exact_powers_and_real_powers_need_a_positive_base():
    """``x^n`` for an integer ``|n| <= 1000`` is Arb's integer power, defined on a ball around 0
    (``x1^1000`` on the ball [0, 1/8], widened by its rounding, contains 0 and (1/8)^1000); ``x1^1001`` is a real power, which is
    only taken of a ball > 0 (nan here); ``x1^(1/2)`` at 1/4 is 1/2, on (0, 1) too."""
    around0 = arb(0.0625, 0.0625)
    v = evaluate(parse("x1^1000", 1), [around0])
    assert v.is_finite() and v.contains(0) and v.contains(arb(0.125) ** 1000)
    assert not evaluate(parse("x1^1001", 1), [around0]).is_finite()
    assert evaluate(parse("x1^(1/2)", 1), [arb(0.25)]) == arb(0.5)
    assert evaluate(parse("x1^(-1000)", 1), [arb(2)]) == arb(2) ** -1000


# ------------------------------------------------------------------------------------------
# property._leaves: the leaves of a property certificate, each an exact box in [L, H]


@pytest.mark.parametrize("raw, words", [
    ([], "no leaves"),
    ("ab", "no leaves"),
    ([[["0"], ["1"], ["1"]]], "leaf 0: not [[lo ...], [hi ...]] of 1 ends each"),
    ([[["0"], "1"]], "leaf 0: not [[lo ...], [hi ...]] of 1 ends each"),
    ([[["0"], ["1", "1"]]], "leaf 0: not [[lo ...], [hi ...]] of 1 ends each"),
    ([[["0"], ["1"]], [["0.5"], ["1"]]], "leaf 1: '0.5' is not a rational string"),
    ([[["1/2"], ["2"]]], "leaf 0 is not a box inside the property's input box"),
])
def test_leaves_are_exact_boxes_inside_the_input_box(raw, words):
    import re

    with pytest.raises(Rejected, match="^" + re.escape(words) + "$"):
        kp._leaves(raw, [F(0)], [F(1)])


def test_leaves_read_exactly():
    assert kp._leaves([[["0"], ["1/3"]], [["1/3"], ["1"]]], [F(0)], [F(1)]) == [([F(0)], [F(1, 3)]), ([F(1, 3)], [F(1)])]


# ------------------------------------------------------------------------------------------
# property.read_property: its messages, whole


_HEAD = "(declare-const X_0 Real)(declare-const Y_0 Real)(assert (>= X_0 0))(assert (<= X_0 1))"


@pytest.mark.parametrize("tail, words", [
    ("(assert (<= Y_0 abc))", "property: 'abc' is not a number string"),
    ("(assert (<= Y_0 ()))", "property: a term is not (op ...)"),
    ("(assert (<= Y_0 ((+ 1 2))))", "property: a term is not (op ...)"),
    ("(assert (or (<= Y_0 X_0) (<= Y_0 1)))", "property: a constraint on the outputs names an input"),
    ("(assert (<= Y_0 (abcdefghijklmnopqrstuvwxyz 1)))", "property: unsupported term (abcdefghijklmnopqrst ...)"),
    ("(assert (foo Y_0 1))", "property: a formula is not a comparison <= >= < > ="),
    ("(assert (<= Y_0 1)))", "property: unbalanced ')'"),
    ("((assert (<= Y_0 1))", "property: unbalanced '('"),
    (" foo", "property: unsupported command 'None'"),  # a bare word, a command with no name, an empty one
    ("((assert) 1)", "property: unsupported command 'None'"),
    ("()", "property: unsupported command 'None'"),
    ("(assert (or))", "property: a formula is not a comparison <= >= < > ="),
    ("(assert (<= (+ X_0 Y_0) 1))", "property: an input constraint is not a bound of one input"),
    ("(abcdefghijklmnopqrstuvwxyz0123456789 1)", "property: unsupported command 'abcdefghijklmnopqrstuvwxyz0123'"),
    ("(declare-const Y_2 Real)", "property: the inputs and outputs are not X_0.. and Y_0.. without gaps"),
])
def test_property_reader_messages_are_exact(tail, words):
    import re

    with pytest.raises(Rejected, match="^" + re.escape(words) + "$"):
        kp.read_property(_HEAD + tail)


def test_property_reader_text_limit_is_4_MiB():
    text = _HEAD + "(assert (<= Y_0 1))"
    text += " " * ((4 << 20) - len(text))
    assert kp.read_property(text)[:3] == ([F(0)], [F(1)], 1)
    with pytest.raises(Rejected, match=r"^property: the text is too long$"):
        kp.read_property(text + " ")


def test_property_reader_by_hand_one_alternative_equalities_and_bounds_without_a_constant():
    """``(or A)`` is one alternative; ``=`` gives both ``<=`` constraints; ``X_0 <= 2 X_0`` is the
    bound ``X_0 >= 0`` (no constant term)."""
    text = ("(declare-const X_0 Real)(declare-const Y_0 Real)(assert (<= X_0 1))(assert (<= X_0 (* 2 X_0)))"
            "(assert (or (<= Y_0 1)))(assert (= Y_0 (/ 1 2)))")
    with pytest.raises(Rejected):  # (/ ...) is not in the grammar: use a decimal
        kp.read_property(text)
    L, H, k, alts = kp.read_property(text.replace("(/ 1 2)", "0.5"))
    assert (L, H, k) == ([F(0)], [F(1)], 1)
    assert alts == [[([(0, F(1))], F(-1, 2), False), ([(0, F(-1))], F(1, 2), False), ([(0, F(1))], F(-1), False)]]


def test_property_reader_keeps_the_tightest_input_bounds_and_skips_smt_settings():
    text = ("(set-logic QF_LRA)(set-info :status unsat)(set-option :produce-models true)"
            "(declare-const X_0 Real)(declare-const Y_0 Real)(assert (>= X_0 (/ 1 4)))(assert (>= X_0 0))"
            "(assert (<= X_0 1))(assert (<= X_0 (* 2 1)))(assert (<= Y_0 1))(check-sat)(exit)")
    assert kp.read_property(text.replace("(/ 1 4)", "0.25"))[:2] == ([F(1, 4)], [F(1)])
    assert kp.read_property(text.replace("(/ 1 4)", "0.25").replace("(>= X_0 0)", "(>= 0 (- X_0))")
                            )[:2] == ([F(1, 4)], [F(1)])


@pytest.mark.parametrize("text, words", [("x1 +", "target: unexpected 'end'"), ("sin(", "target: unexpected 'end'"),
                                         ("(x1", "target: expected ')' at token 2"),
                                         ("y", "target: unexpected 'y'"), ("x2 + 1", "target: unexpected 'x2'"),
                                         ("sin-x1)", "target: expected '(' at token 1"),
                                         ("sin(x1, x1)", "target: sin takes one argument"),
                                         ("max(x1)", "target: max takes two or more"),
                                         ("x1 x1", "target: unexpected 'x1' after the expression")])
def test_target_messages_name_the_end_and_the_token(text, words):
    import re

    with pytest.raises(Rejected, match="^" + re.escape(words) + "$"):
        parse(text, 1)


def test_target_nesting_limit_is_100_parentheses():
    """``expr`` is entered at depth 0 and once more inside each pair of parentheses: 100 pairs
    are read, 101 are refused."""
    assert parse("(" * 100 + "x1" + ")" * 100, 1) == ("x", 0)
    with pytest.raises(Rejected, match=r"^target: nested too deeply$"):
        parse("(" * 101 + "x1" + ")" * 101, 1)


@pytest.mark.parametrize("opening", ["-(", "+(", "2^(", "2**("])
def test_target_nesting_counts_a_sign_or_a_power_as_one_level(opening):
    """A sign or a power's exponent is one level more, its parentheses another: 50 such pairs
    reach depth 100 and are read, 51 are refused."""
    assert parse(opening * 50 + "x1" + ")" * 50, 1)
    with pytest.raises(Rejected, match=r"^target: nested too deeply$"):
        parse(opening * 51 + "x1" + ")" * 51, 1)


@pytest.mark.parametrize("opening", ["sin(", "max(0,", "min(1,1,"])
def test_target_nesting_counts_a_function_argument_as_one_level(opening):
    """Each argument of a function, the first or a later one, is one level: 100 nested calls are
    read, 101 refused."""
    assert parse(opening * 100 + "x1" + ")" * 100, 1)
    with pytest.raises(Rejected, match=r"^target: nested too deeply$"):
        parse(opening * 101 + "x1" + ")" * 101, 1)


def test_property_alternatives_limit_is_4096():
    """Twelve two-way ``or``s make 4096 unsafe alternatives (read), thirteen make 8192 (refused);
    an input bounded on one side only is refused by name."""
    ors = "(assert (or (<= Y_0 1) (>= Y_0 2)))"
    alts = kp.read_property(_HEAD + ors * 12)[3]
    assert len(alts) == 4096 and all(len(a) == 12 for a in alts)
    with pytest.raises(Rejected, match=r"^property: more than 4096 unsafe alternatives$"):
        kp.read_property(_HEAD + ors * 13)
    with pytest.raises(Rejected, match=r"^property: an input is not bounded from both sides by a non-empty interval$"):
        kp.read_property("(declare-const X_0 Real)(declare-const Y_0 Real)(assert (<= X_0 1))(assert (<= Y_0 1))")


# ------------------------------------------------------------------------------------------
# property.check_property: its field messages, whole

_PROPERTY = "kernel_corpus/property/accepted.json"


def _accepted_property():
    import json
    import pathlib

    return json.loads((pathlib.Path(__file__).resolve().parents[1] / "data" / _PROPERTY).read_text())


def test_property_certificate_field_messages_are_exact():
    import re

    cert = _accepted_property()
    assert kp.check_property(dict(cert))  # the stored certificate is accepted
    extra = dict(cert, a=1, b=2, c=3, d=4)
    del extra["leaves"]
    with pytest.raises(Rejected, match="^" + re.escape("unknown or missing fields: ['a', 'b', 'c']") + "$"):
        kp.check_property(extra)
    with pytest.raises(Rejected, match="^" + re.escape(
            "the verdict is not 'proved' or the claim's wording is not the claim checked") + "$"):
        kp.check_property(dict(cert, verdict="undecided"))


@pytest.mark.parametrize("edit, words", [
    ({"model": []}, "'model' is not an object or 'property' is not a string"),
    ({"property": 7}, "'model' is not an object or 'property' is not a string"),
    ({"model_sha256": "0" * 64}, "the model does not match model_sha256"),
    ({"property_sha256": "0" * 64}, "the property does not match property_sha256"),
])
def test_property_certificate_shape_and_digest_messages_are_exact(edit, words):
    import re

    with pytest.raises(Rejected, match="^" + re.escape(words) + "$"):
        kp.check_property(dict(_accepted_property(), **edit))


def _with_model(cert, model):
    import hashlib
    import json

    canonical = json.dumps(model, sort_keys=True, separators=(",", ":")).encode()
    return dict(cert, model=model, model_sha256=hashlib.sha256(canonical).hexdigest())


@pytest.mark.parametrize("embedding", [[], {"base": []}, {"base": [7]}])
def test_property_model_without_readout_or_embedding_base_is_refused_by_name(embedding):
    import re

    cert = _accepted_property()
    model = {k: v for k, v in cert["model"].items() if k != "readout"} | {"embedding": embedding}
    with pytest.raises(Rejected, match="^" + re.escape("model: not a vector-input model with an embedding, nor a layer graph") + "$"):
        kp.check_property(_with_model(cert, model))


def test_property_leaves_with_a_gap_are_refused_by_name():
    import re

    cert = _accepted_property()
    with pytest.raises(Rejected, match="^" + re.escape("the leaves do not cover the property's input box") + "$"):
        kp.check_property(dict(cert, leaves=cert["leaves"][1:]))


def test_property_output_count_message_and_progress():
    import hashlib
    import re

    cert = _accepted_property()
    seen = []
    kp.check_property(dict(cert), lambda done, total: seen.append((done, total)))
    n = len(cert["leaves"])
    assert seen == [(i, n) for i in range(1, n + 1)]
    text = cert["property"] + "\n(declare-const Y_1 Real)\n"
    two = dict(cert, property=text, property_sha256=hashlib.sha256(text.encode()).hexdigest())
    with pytest.raises(Rejected, match="^" + re.escape("the property has 2 outputs, the model 1") + "$"):
        kp.check_property(two)


def _on_a_wider_box(leaves):
    """The stored certificate's model with a property on X_0 in [1, 3], X_1 in [0, 1] whose one
    unsafe alternative is the constant constraint ``1 <= 0`` (false everywhere), and ``leaves``."""
    import hashlib

    text = ("(declare-const X_0 Real)(declare-const X_1 Real)(declare-const Y_0 Real)"
            "(assert (>= X_0 1))(assert (<= X_0 3))(assert (>= X_1 0))(assert (<= X_1 1))(assert (<= 1 0))")
    cert = _accepted_property()
    return dict(cert, property=text, property_sha256=hashlib.sha256(text.encode()).hexdigest(),
                leaves=[[[a, "0"], [b, "1"]] for a, b in leaves])


def test_property_leaves_are_scaled_to_the_unit_cube_from_the_property_box():
    """On X_0 in [1, 3] the leaves [1, 2] and [2, 3] cover the box, [1, 2] and [5/2, 3] leave the
    gap (2, 5/2): the cover is checked after scaling by (x - L) / (H - L), by hand."""
    import re

    assert kp.check_property(_on_a_wider_box([("1", "2"), ("2", "3")])).startswith("2 leaves cover")
    with pytest.raises(Rejected, match="^" + re.escape("the leaves do not cover the property's input box") + "$"):
        kp.check_property(_on_a_wider_box([("1", "2"), ("5/2", "3")]))


def test_property_naming_one_output_more_than_a_readout_less_model_is_refused_by_the_count():
    """Without a readout the stored model's outputs are its 3 x 3 final entries, Y_0..Y_8; a
    property declaring Y_0..Y_9 and constraining Y_9 is refused by the output count (no network is
    built for an output the model does not have)."""
    import hashlib
    import re

    cert = _accepted_property()
    model = {k: v for k, v in cert["model"].items() if k != "readout"}
    text = ("".join(f"(declare-const {v} Real)" for v in ["X_0", "X_1"] + [f"Y_{j}" for j in range(10)])
            + "(assert (>= X_0 0))(assert (<= X_0 1))(assert (>= X_1 0))(assert (<= X_1 1))(assert (<= Y_9 0))")
    cert = dict(_with_model(cert, model), property=text, property_sha256=hashlib.sha256(text.encode()).hexdigest())
    with pytest.raises(Rejected, match="^" + re.escape("the property has 10 outputs, the model 9") + "$"):
        kp.check_property(cert)


# ------------------------------------------------------------------------------------------
# network.py (the fourth run): small models built for one feature each, every enclosure
# compared with symbounds' own 300-bit evaluation (tests/byon_helpers.py) and a hand-worked value


def _model(base, E, layers, row=0, column=0, col=0):
    return {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 128,
            "embedding": {"base": base, "E": E, "column": col}, "layers": layers,
            "readout": {"row": row, "column": column}}


def _enclosed(model, lo, hi, exact=None, width=None):
    """The kernel's enclosure of ``model`` over ``[lo, hi]`` holds the reference at the corners and
    the centre (and the hand-worked ``exact(x)`` there), and is at most ``width`` wide."""
    import itertools
    import pathlib
    import sys

    from flint import ctx

    from symbounds_kernel import verify
    from symbounds_kernel.network import Network

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from byon_helpers import as_fraction, reference

    old, ctx.prec = ctx.prec, verify.PREC
    try:
        T = Network(model, len(lo)).enclose(lo, hi)
    finally:
        ctx.prec = old
    up, down = verify._upper(T), -verify._upper(-T)
    points = [list(p) for p in itertools.product(*zip(lo, hi))] + [[(a + b) / 2 for a, b in zip(lo, hi)]]
    for x in points:
        v = as_fraction(reference(model, x)[0])
        assert down <= v <= up, (x, float(v), float(down), float(up))
        if exact is not None:
            assert abs(v - exact(x)) < F(1, 10**60)
    if width is not None:
        assert up - down <= width, float(up - down)
    return down, up


def test_an_attention_skip_carries_a_row_no_head_writes():
    """The readout row 1 is written by no head (W_O's row 1 is 0): after the layer it is the skip's
    copy of ``1/2 + x``, so the layer must read its own output rows from its input (``_reads``);
    the scores ``x^2, x`` depend on ``x``, so the layer is not in the affine stage."""
    m = _model([["0", "1"], ["1/2", "0"]], [["1"], ["1"]],
               [{"type": "attention", "kind": "softmax", "skip": "1", "heads": [
                   {"W_Q": [["1", "0"]], "W_K": [["1", "0"]], "W_V": [["1", "0"]], "W_O": [["1"], ["0"]]}]}], row=1)
    _enclosed(m, [F(1, 4)], [F(1, 2)], exact=lambda x: F(1, 2) + x[0], width=F(1, 4) + F(1, 10**6))


def test_constant_hardmax_scores_whose_ranges_touch_have_no_winner():
    """The affine stage's hardmax row: a score ball ``t`` about ``[1, 2]`` and the exact score at its
    upper end touch there, where the true scores may tie (the hardmax then averages), so neither
    wins; 2^-20 above it, the exact score wins."""
    from symbounds_kernel.network import _weights

    t = arb(1.5, 0.5)
    with pytest.raises(ArithmeticError, match="^a hardmax row whose winner is not decided$"):
        _weights("hardmax", [t, t.upper()])
    with pytest.raises(ArithmeticError):
        _weights("hardmax", [t.upper(), t])
    e, one = _weights("hardmax", [t, t.upper() + arb(2) ** -20])
    assert [float(v) for v in e] == [0, 1] and float(one) == 1


@pytest.mark.parametrize("row, exact", [
    (0, lambda x: F(1, 2) + x[0]),  # relu(1/2), a unit that reads no input, plus relu(x)
    (1, lambda x: F(1, 4)),         # b2 alone: the row has no skip and no unit
])
def test_ffn_units_and_rows_with_no_input(row, exact):
    m = _model([["0"], ["0"]], [["1"], ["0"]],
               [{"type": "ffn", "skip": "0", "W1": [["0", "0"], ["1", "0"]], "b1": ["1/2", "0"],
                 "W2": [["1", "1"], ["0", "0"]], "b2": ["0", "1/4"]}], row=row)
    _enclosed(m, [F(1, 4)], [F(1, 2)], exact=exact, width=F(1, 4) + F(1, 10**6))


def test_a_hardmax_layer_of_constant_scores_is_in_the_affine_stage():
    """Positions 1, 2 in row 0 give the scores ``p_j p_k``, independent of ``x``, whose winner is
    token 1 for both queries; its value row holds ``1/3 + x`` (x enters at token 1): T = 1/3 + x."""
    from symbounds_kernel.network import Network

    m = _model([["1", "2"], ["5", "1/3"]], [["0"], ["1"]],
               [{"type": "attention", "kind": "hardmax", "skip": "0", "heads": [
                   {"W_Q": [["1", "0"]], "W_K": [["1", "0"]], "W_V": [["0", "1"]], "W_O": [["0"], ["1"]]}]}],
               row=1, col=1)
    assert Network(m, 1).start == 1
    _enclosed(m, [F(0)], [F(1, 2)], exact=lambda x: F(1, 3) + x[0], width=F(1, 2) + F(1, 10**6))


@pytest.mark.parametrize("tau", ["2", "1/3"])
def test_a_softmax_layer_with_tau_and_no_skip_writes_a_row_it_does_not_read(tau):
    """Scores ``x^2 / tau, x / tau`` (they depend on ``x``: Taylor stage), values ``x, 1`` written
    to row 1, which the layer does not read and, with no skip, does not copy:
    ``T = (x e^(x^2/tau) + e^(x/tau)) / (e^(x^2/tau) + e^(x/tau))``, also at 50 digits."""
    import mpmath

    m = _model([["0", "1"], ["0", "0"]], [["1"], ["0"]],
               [{"type": "attention", "kind": "softmax", "skip": "0", "tau": tau, "heads": [
                   {"W_Q": [["1", "0"]], "W_K": [["1", "0"]], "W_V": [["1", "0"]], "W_O": [["0"], ["1"]]}]}], row=1)
    t = F(tau)

    def exact(x):
        with mpmath.workdps(50):
            q = lambda v: mpmath.mpf(v.numerator) / v.denominator
            a, b = mpmath.exp(q(x[0] ** 2 / t)), mpmath.exp(q(x[0] / t))
            v = (q(x[0]) * a + b) / (a + b)
            return F(mpmath.nstr(v, 45))

    down, up = _enclosed(m, [F(1, 2)], [F(1, 2) + F(1, 64)], width=F(1, 100))
    assert down <= exact([F(1, 2)]) + F(1, 10**40) and exact([F(1, 2)]) - F(1, 10**40) <= up


def test_a_second_head_with_zero_rows_after_one_that_writes_no_needed_row():
    """Head 0 writes only row 0 (not read out: skipped); head 1 writes row 1 and has a zero row in
    each of W_Q, W_K, W_V (models with no input term): ``T = (x e^(x^2) + e^x) / (e^(x^2) + e^x)``."""
    import mpmath

    m = _model([["0", "1"], ["0", "0"]], [["1"], ["0"]],
               [{"type": "attention", "kind": "softmax", "skip": "0", "heads": [
                   {"W_Q": [["1", "0"]], "W_K": [["1", "0"]], "W_V": [["1", "0"]], "W_O": [["1"], ["0"]]},
                   {"W_Q": [["1", "0"], ["0", "0"]], "W_K": [["1", "0"], ["0", "0"]], "W_V": [["0", "0"], ["1", "0"]],
                    "W_O": [["0", "0"], ["0", "1"]]}]}], row=1)
    down, up = _enclosed(m, [F(1, 2)], [F(1, 2) + F(1, 64)], width=F(1, 100))
    with mpmath.workdps(50):
        a, b = mpmath.exp(mpmath.mpf(1) / 4), mpmath.exp(mpmath.mpf(1) / 2)
        v = F(mpmath.nstr((a / 2 + b) / (a + b), 45))
    assert down - F(1, 10**40) <= v <= up + F(1, 10**40)


def test_relu_units_with_opposite_weights_and_equal_biases_are_not_a_pair():
    """``relu(x - 1/4) + relu(-x - 1/4)``: the weights are opposite but the biases equal, not
    opposite, so ``relu(-u) = relu(u) - u`` does not apply (it would give ``1/4`` at ``x = 0``)."""
    m = _model([["0"]], [["1"]], [{"type": "ffn", "skip": "0", "W1": [["1"], ["-1"]], "b1": ["-1/4", "-1/4"],
                                   "W2": [["1", "1"]], "b2": ["0"]}])
    _enclosed(m, [F(0)], [F(1, 8)], exact=lambda x: F(0), width=F(1, 10**6))
    _enclosed(m, [F(1, 2)], [F(3, 4)], exact=lambda x: x[0] - F(1, 4), width=F(1, 4) + F(1, 10**6))


def test_a_relu_pair_with_a_bias_is_rewritten_exactly():
    """``relu(x - 1/4) + 2 relu(1/4 - x)``, a pair: ``3 relu(x - 1/4) - 2 (x - 1/4)``, whose constant
    ``-2 (-1/4)`` comes from the bias; it is ``x - 1/4`` on [1/2, 3/4] and ``1/2 - 2x`` on [0, 1/8]."""
    from symbounds_kernel.network import parse_model

    m = _model([["0"]], [["1"]], [{"type": "ffn", "skip": "0", "W1": [["1"], ["-1"]], "b1": ["-1/4", "1/4"],
                                   "W2": [["1", "2"]], "b2": ["0"]}])
    assert len(parse_model(m, 1)[3][0][3]) == 1  # one unit left
    _enclosed(m, [F(1, 2)], [F(3, 4)], exact=lambda x: x[0] - F(1, 4), width=F(1, 4) + F(1, 10**6))
    _enclosed(m, [F(0)], [F(1, 8)], exact=lambda x: F(1, 2) - 2 * x[0], width=F(1, 4) + F(1, 10**6))


def _two_tokens(row=1, column=0, second=False):
    """Scores ``z_0 z_0'`` of row 0 (``x`` at token 0, 1 at token 1: Taylor stage), values row 0
    written to row 1; with ``second`` the layer keeps row 0 (a skip) and a second such layer
    follows, whose values are that row 1."""
    head = {"W_Q": [["1", "0"]], "W_K": [["1", "0"]], "W_V": [["1", "0"]], "W_O": [["0"], ["1"]]}
    layers = [{"type": "attention", "kind": "softmax", "skip": "1" if second else "0", "heads": [head]}]
    if second:
        layers.append({"type": "attention", "kind": "softmax", "skip": "0", "heads": [dict(head, W_V=[["0", "1"]])]})
    return _model([["0", "1"], ["0", "0"]], [["1"], ["0"]], layers, row=row, column=column)


def test_the_readout_column_of_the_last_attention_layer():
    """Column 1 (the query is token 1, scores ``x, 1``): ``T = (x e^x + e) / (e^x + e)``, at
    ``x = 1/2`` about 0.811; column 0 there is about 0.781."""
    import mpmath

    down, up = _enclosed(_two_tokens(column=1), [F(1, 2)], [F(1, 2) + F(1, 256)], width=F(1, 500))
    with mpmath.workdps(50):
        a, e = mpmath.exp(mpmath.mpf(1) / 2), mpmath.e
        v = F(mpmath.nstr((a / 2 + e) / (a + e), 45))
    assert down - F(1, 10**40) <= v <= up + F(1, 10**40)


def test_two_attention_layers_in_the_taylor_stage():
    """The first layer must give every column (the second reads both tokens' keys and values):
    ``T = sum_k w_k v_k``, ``w`` the softmax of ``x, 1`` times ``x``, ``v_k`` the first layer's
    outputs at the two tokens (50 digits)."""
    import mpmath

    down, up = _enclosed(_two_tokens(second=True), [F(1, 2)], [F(1, 2) + F(1, 256)], width=F(1, 500))
    with mpmath.workdps(50):
        x = mpmath.mpf(1) / 2
        sm = lambda s, v: sum(mpmath.exp(a) * b for a, b in zip(s, v)) / sum(mpmath.exp(a) for a in s)
        v = [sm([x * x, x], [x, 1]), sm([x, 1], [x, 1])]
        t = F(mpmath.nstr(sm([x * x, x], v), 45))
    assert down - F(1, 10**40) <= t <= up + F(1, 10**40)


@pytest.mark.parametrize("edit, message", [
    ({"readout": {"row": 2, "column": 0}}, "model: readout.row is not an integer in [0, 2)"),
    ({"readout": {"row": True, "column": 0}}, "model: readout.row is not an integer in [0, 2)"),
    ({"readout": {"row": 0, "column": "0"}}, "model: readout.column is not an integer in [0, 2)"),
    ({"readout": {"row": 0, "column": -1}}, "model: readout.column is not an integer in [0, 2)"),
])
def test_readout_indices_are_integers_in_range(edit, message):
    import re

    from symbounds_kernel.network import parse_model

    with pytest.raises(Rejected, match="^" + re.escape(message) + "$"):
        parse_model(dict(_two_tokens(), **edit), 1)


def test_an_embedding_with_more_input_columns_than_d_is_refused():
    import re

    from symbounds_kernel.network import Network

    m = _two_tokens()
    m["embedding"]["E"] = [["1", "0"], ["0", "0"]]
    with pytest.raises(Rejected, match="^" + re.escape("model: embedding.E has the wrong shape") + "$"):
        Network(m, 1)
    Network(m, 2)


def test_two_layers_in_the_affine_stage():
    """Two hardmax layers of constant scores (positions 1, 2; winner token 1), each adding token 1's
    row 1 to every token's row 1: ``[5, 1/3 + x]`` becomes ``[16/3 + x, 2/3 + 2x]``, then
    ``[6 + 3x, 4/3 + 4x]``; both layers are in the affine stage and applied once each."""
    from symbounds_kernel.network import Network

    layer = {"type": "attention", "kind": "hardmax", "skip": "1", "heads": [
        {"W_Q": [["1", "0"]], "W_K": [["1", "0"]], "W_V": [["0", "1"]], "W_O": [["0"], ["1"]]}]}
    m = _model([["1", "2"], ["5", "1/3"]], [["0"], ["1"]], [layer, layer], row=1, col=1)
    assert Network(m, 1).start == 2
    _enclosed(m, [F(0)], [F(1, 2)], exact=lambda x: 6 + 3 * x[0], width=F(3, 2) + F(1, 10**6))


# ------------------------------------------------------------------------------------------
# network.parse_model, _matrix, _ball (the fifth run): every refusal's message, matched whole,
# and the fields read from a good model compared with the file's own numbers


def _ffn_model():
    """``_two_tokens`` with an FFN layer after the attention layer (two units, no pair)."""
    m = _two_tokens()
    m["layers"].append({"type": "ffn", "skip": "1", "W1": [["1", "0"], ["0", "2"]], "b1": ["1/2", "-1/3"],
                        "W2": [["1", "0"], ["0", "3"]], "b2": ["1/5", "0"]})
    return m


def _drop(d, k):
    d.pop(k)


_PARSER_CASES = [
    (lambda m: m.clear(), "model: not a vector-input model of format 'symbounds-transformer/1'"),
    (lambda m: m.update(format="symbounds-transformer/2"), "model: not a vector-input model of format 'symbounds-transformer/1'"),
    (lambda m: m.update(input="tokens"), "model: not a vector-input model of format 'symbounds-transformer/1'"),
    (lambda m: _drop(m, "embedding"), "model: needs 'embedding', 'layers' and 'readout'"),
    (lambda m: m.update(embedding=[]), "model: needs 'embedding', 'layers' and 'readout'"),
    (lambda m: _drop(m, "readout"), "model: needs 'embedding', 'layers' and 'readout'"),
    (lambda m: m.update(readout=[0, 0]), "model: needs 'embedding', 'layers' and 'readout'"),
    (lambda m: _drop(m, "layers"), "model: needs 'embedding', 'layers' and 'readout'"),
    (lambda m: m.update(layers={}), "model: needs 'embedding', 'layers' and 'readout'"),
    (lambda m: m.update(layers=[]), "model: no layers"),
    (lambda m: m["embedding"].update(base=None), "model: embedding.base is not a non-empty list of rows"),
    (lambda m: m["embedding"].update(base=[]), "model: embedding.base is not a non-empty list of rows"),
    (lambda m: m["embedding"].update(base=[["0", "1"], []]), "model: embedding.base is not a non-empty list of rows"),
    (lambda m: m["embedding"].update(base=[["0", "1"], "01"]), "model: embedding.base is not a non-empty list of rows"),
    (lambda m: m["embedding"].update(base=[["0", "1"], ["0"]]), "model: embedding.base has the wrong shape"),
    (lambda m: m["embedding"]["base"][1].__setitem__(0, "x"), "model: embedding.base: 'x' is not a number string"),
    (lambda m: m["embedding"]["base"][1].__setitem__(0, "1/0"), "model: embedding.base: a zero denominator"),
    (lambda m: m["embedding"].update(E=[["1"]]), "model: embedding.E has the wrong shape"),
    (lambda m: m["embedding"].update(E=[["1"], ["1"], ["1"]]), "model: embedding.E has the wrong shape"),
    (lambda m: m["embedding"].update(E=None), "model: embedding.E is not a non-empty list of rows"),
    (lambda m: m["embedding"].update(column=2), "model: embedding.column is not an integer in [0, 2)"),
    (lambda m: _drop(m["embedding"], "column"), "model: embedding.column is not an integer in [0, 2)"),
    (lambda m: m["layers"].__setitem__(0, 3), "model: layers[0] is not an object"),
    (lambda m: m["layers"].__setitem__(1, []), "model: layers[1] is not an object"),
    (lambda m: m["layers"][0].update(skip="x"), "model: layers[0].skip: 'x' is not a number string"),
    (lambda m: m["layers"][1].update(skip=1), "model: layers[1].skip: '1' is not a number string"),
    (lambda m: m["layers"][0].update(type="mlp"), "model: layers[0] is neither an attention nor an ffn layer"),
    (lambda m: _drop(m["layers"][0], "type"), "model: layers[0] is neither an attention nor an ffn layer"),
    (lambda m: m["layers"][0].update(kind="linear"), "model: layers[0] is neither an attention nor an ffn layer"),
    (lambda m: _drop(m["layers"][0], "kind"), "model: layers[0] is neither an attention nor an ffn layer"),
    (lambda m: m["layers"][0].update(heads=[]), "model: layers[0] is neither an attention nor an ffn layer"),
    (lambda m: _drop(m["layers"][0], "heads"), "model: layers[0] is neither an attention nor an ffn layer"),
    (lambda m: m["layers"][1].update(type="attention"), "model: layers[1] is neither an attention nor an ffn layer"),
    (lambda m: m["layers"][0].update(tau="x"), "model: layers[0].tau: 'x' is not a number string"),
    (lambda m: m["layers"][0].update(tau="0"), "model: layers[0] has a non-positive tau or no list of heads"),
    (lambda m: m["layers"][0].update(tau="-1/2"), "model: layers[0] has a non-positive tau or no list of heads"),
    (lambda m: m["layers"][0].update(heads={"W_Q": 1}), "model: layers[0] has a non-positive tau or no list of heads"),
    (lambda m: m["layers"][0].update(heads="h"), "model: layers[0] has a non-positive tau or no list of heads"),
    (lambda m: m["layers"][0]["heads"].__setitem__(0, 5), "model: layers[0].heads[0].W_Q is not a non-empty list of rows"),
    (lambda m: m["layers"][0]["heads"].append(5), "model: layers[0].heads[1].W_Q is not a non-empty list of rows"),
    (lambda m: m["layers"][0]["heads"][0].update(W_Q=[["1"]]), "model: layers[0].heads[0].W_Q has the wrong shape"),
    (lambda m: m["layers"][0]["heads"][0].update(W_K=[["1", "0"], ["0", "0"]]), "model: layers[0].heads[0].W_K has the wrong shape"),
    (lambda m: m["layers"][0]["heads"][0].update(W_K=[["1"]]), "model: layers[0].heads[0].W_K has the wrong shape"),
    (lambda m: m["layers"][0]["heads"][0].update(W_V=[["1"]]), "model: layers[0].heads[0].W_V has the wrong shape"),
    (lambda m: m["layers"][0]["heads"][0].update(W_V=None), "model: layers[0].heads[0].W_V is not a non-empty list of rows"),
    (lambda m: m["layers"][0]["heads"][0].update(W_O=[["0"]]), "model: layers[0].heads[0].W_O has the wrong shape"),
    (lambda m: m["layers"][0]["heads"][0].update(W_O=[["0", "0"], ["1", "0"]]), "model: layers[0].heads[0].W_O has the wrong shape"),
    (lambda m: m["layers"][0]["heads"][0]["W_O"][1].__setitem__(0, "1e"), "model: layers[0].heads[0].W_O: '1e' is not a number string"),
    (lambda m: m["layers"][0]["heads"][0].update(W_K=None), "model: layers[0].heads[0].W_K is not a non-empty list of rows"),
    (lambda m: m["layers"][0]["heads"][0].update(W_O=None), "model: layers[0].heads[0].W_O is not a non-empty list of rows"),
    (lambda m: m["layers"][1].update(W1=[["1"], ["0"]]), "model: layers[1].W1 has the wrong shape"),
    (lambda m: m["layers"][1].update(W1=None), "model: layers[1].W1 is not a non-empty list of rows"),
    (lambda m: m["layers"][1].update(b1=["1"]), "model: layers[1].b1 has the wrong shape"),
    (lambda m: m["layers"][1].update(b1=None), "model: layers[1].b1 is not a non-empty list of rows"),
    (lambda m: m["layers"][1].update(b1=["1", "x"]), "model: layers[1].b1: 'x' is not a number string"),
    (lambda m: m["layers"][1].update(W2=[["1", "0"]]), "model: layers[1].W2 has the wrong shape"),
    (lambda m: m["layers"][1].update(W2=[["1"], ["0"]]), "model: layers[1].W2 has the wrong shape"),
    (lambda m: m["layers"][1].update(W2=None), "model: layers[1].W2 is not a non-empty list of rows"),
    (lambda m: m["layers"][1].update(b2=["1", "0", "0"]), "model: layers[1].b2 has the wrong shape"),
    (lambda m: m["layers"][1].update(b2=None), "model: layers[1].b2 is not a non-empty list of rows"),
    (lambda m: m["layers"][1].update(b2=["1", "2/0"]), "model: layers[1].b2: a zero denominator"),
]


@pytest.mark.parametrize("edit, message", _PARSER_CASES)
def test_model_parser_messages_are_exact(edit, message):
    import re

    from symbounds_kernel.network import parse_model

    m = _ffn_model()
    parse_model(m, 1)
    edit(m)
    with pytest.raises(Rejected, match="^" + re.escape(message) + "$"):
        parse_model(m, 1)


def test_model_parser_reads_the_fields_of_a_good_model():
    """Every field of ``_ffn_model`` as the file gives it: the exact weights, ``tau`` 1 when absent
    and as given otherwise, a skip ``0`` when absent, the FFN's biases and linear part as balls."""
    from symbounds_kernel.network import parse_model

    m = _ffn_model()
    base, E, col, layers, readout = parse_model(m, 1)
    assert base == [[0, 1], [0, 0]] and E == [[1], [0]] and col == 0 and readout == (1, 0)
    att, ffn = layers
    assert att[:4] == ("attention", "softmax", 0, 1) and type(att[3]) is Fraction
    assert att[4] == [([[1, 0]], [[1, 0]], [[1, 0]], [[0], [1]])]
    assert [[[(j, float(v)) for j, v in r] for r in W] for W in att[5][0]] == [[[(0, 1.0)]]] * 3 + [[[], [(0, 1.0)]]]
    kind, Lin, l, W1, b1, W2 = ffn
    assert kind == "ffn" and [[(j, float(v)) for j, v in r] for r in Lin] == [[(0, 1.0)], [(1, 1.0)]]
    assert abs(float(l[0].mid()) - 0.2) < 1e-15 and l[0].rad() < 1e-15 and l[1] == 0
    assert [[(j, float(v)) for j, v in r] for r in W1] == [[(0, 1.0)], [(1, 2.0)]]
    assert b1[0] == arb(1) / 2 and abs(float(b1[1].mid()) + 1 / 3) < 1e-15 and b1[1].rad() < 1e-15
    assert [[(j, float(v)) for j, v in r] for r in W2] == [[(0, 1.0)], [(1, 3.0)]]
    m["layers"][0].update(tau="2/3")
    m["layers"][1].pop("skip")
    layers = parse_model(m, 1)[3]
    assert layers[0][3] == Fraction(2, 3)
    assert [[(j, float(v)) for j, v in r] for r in layers[1][1]] == [[], []]  # skip 0: no linear part
    m["layers"][0].pop("skip")
    assert parse_model(m, 1)[3][0][2] == 0


def test_the_rows_needed_are_carried_back_through_three_layers():
    """Three FFNs, readout row 1: the last writes row 1 from row 0 (``relu(x)``), the two before it
    only copy (skip 1), so they must give row 0, which the readout row does not name: each layer's
    needed rows are the reads of the layer right after it."""
    copy = {"type": "ffn", "skip": "1", "W1": [["0", "0"]], "b1": ["0"], "W2": [["0"], ["0"]], "b2": ["0", "0"]}
    last = {"type": "ffn", "skip": "0", "W1": [["1", "0"]], "b1": ["0"], "W2": [["0"], ["1"]], "b2": ["0", "0"]}
    m = _model([["0"], ["0"]], [["1"], ["0"]], [copy, dict(copy), last], row=1)
    _enclosed(m, [F(1, 4)], [F(1, 2)], exact=lambda x: x[0], width=F(1, 4) + F(1, 10**6))
