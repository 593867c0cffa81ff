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
                                         ("(x1", "target: expected ')' at token 2")])
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
    with pytest.raises(Rejected, match="^" + re.escape("model: not a vector-input model with an embedding") + "$"):
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
