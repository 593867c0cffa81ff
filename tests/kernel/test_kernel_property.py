"""The checker kernel reads property certificates (symbounds_kernel/property.py, docs/checking.md).

The certificates are written by ``symbounds certify --spec --out``; the reader is compared with
symbounds' own VNN-LIB parser (a separate implementation); the edits of
``tests/kernel/make_property_corpus.py`` must all be rejected, both as stored and applied to a
certificate written afresh.  The edits that keep the digests make the claim false (the model
reaches the lowered threshold; ``tests/data/fails.vnnlib`` is sat), so only the mathematics can
reject them.
"""

import json
import pathlib
import sys
from fractions import Fraction

import pytest
from flint import arb

import symbounds_kernel
from symbounds_kernel import property as kp
from symbounds_kernel import taylor
from symbounds_kernel.read import Rejected

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from cli_helpers import run_cli  # noqa: E402
from make_property_corpus import EDITS, FOLDER, edited, redigest  # noqa: E402

DATA = HERE.parent / "data"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A property certificate written by ``symbounds certify`` (not the stored one)."""
    from symbounds.app.cli import main

    t = tmp_path_factory.mktemp("kprop")
    out = t / "holds.cert.json"
    code = main(["certify", "--model", str(DATA / "residual_model.json"), "--spec", str(DATA / "holds.vnnlib"),
                 "--out", str(out), "--timeout", "120", "--quiet"])
    assert code == 0 and out.exists()
    return json.loads(out.read_text()), t


def _kernel(cert, tmp_path, name="c.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cert))
    return symbounds_kernel.check_file(str(p))


def test_the_kernel_accepts_the_certificate_certify_writes(written):
    cert, t = written
    ok, reason = _kernel(cert, t)
    assert ok, reason
    assert reason.startswith(f"{len(cert['leaves'])} leaves cover") and "2 unsafe alternative(s)" in reason


@pytest.mark.parametrize("name", sorted(EDITS))
def test_the_kernel_rejects_every_edit_of_a_fresh_certificate(written, name):
    cert, t = written
    ok, reason = _kernel(edited(cert, name), t, f"{name}.json")
    assert not ok and EDITS[name][1] in reason, reason


def test_the_stored_corpus_is_the_listed_edits_and_is_rejected():
    assert {p.stem for p in FOLDER.glob("*.json")} == set(EDITS) | {"accepted"}
    ok, reason = symbounds_kernel.check_file(str(FOLDER / "accepted.json"))
    assert ok, reason
    for name, (_, words) in EDITS.items():
        ok, reason = symbounds_kernel.check_file(str(FOLDER / f"{name}.json"))
        assert not ok and words in reason, (name, reason)


def test_the_false_edits_are_false(written):
    """Independently of both checkers (the mpmath evaluator of tests/byon_helpers.py at 300 bits):
    the edited network, or the network against the edited threshold, reaches the unsafe region at (1, 1)."""
    from byon_helpers import reference

    cert, _ = written
    y = reference(cert["model"], [1, 1])[0]
    assert 2.25 < y < 2.5  # the 2.5 of holds.vnnlib is not reached here; 2.25 is
    assert reference(edited(cert, "bias_raised_so_the_property_fails")["model"], [1, 1])[0] >= 2.5
    assert "(>= Y_0 2.25)" in edited(cert, "threshold_lowered_so_the_property_fails")["property"]


def test_a_leaf_dropped_in_the_middle_is_a_named_gap_and_the_prover_agrees(written):
    from symbounds.core.property_certificate import PropertyCertificateError, check_property_certificate

    cert, t = written
    c = edited(cert, "leaf_dropped")
    with pytest.raises(PropertyCertificateError, match="do not cover"):
        check_property_certificate(c)
    assert not _kernel(c, t)[0]


READER_CASES = [
    (DATA / "holds.vnnlib").read_text(),
    (DATA / "fails.vnnlib").read_text(),
    "(declare-const X_0 Real)(declare-const Y_0 Real)(declare-const Y_1 Real)\n"
    "(assert (and (>= X_0 -1.5e-1) (and (<= X_0 3/4) (<= (* 2 X_0) 1))))\n"
    "(assert (< (- Y_0 Y_1) (- 2)))\n(assert (or (and (> Y_0 0.5) (= Y_1 (* Y_0 1.25))) (>= (+ Y_0 Y_1 Y_0) 3)))\n"
    "(assert (or (<= Y_1 -7) (and (>= Y_1 7) (<= (- Y_0) 0))))\n(check-sat)\n",
]


def _prover(text):
    from symbounds.core.vnnlib import parse_vnnlib

    s = parse_vnnlib(text)
    alts = [sorted((tuple(sorted(c.coeffs)), c.const, c.strict) for c in alt) for alt in s.unsafe]
    return list(s.lo), list(s.hi), s.outputs, sorted(alts)


def _kernel_reader(text):
    lo, hi, k, alts = kp.read_property(text)
    norm = lambda cs: tuple(sorted((j, Fraction(w)) for j, w in cs if w))
    return lo, hi, k, sorted(sorted((norm(cs), Fraction(const), strict) for cs, const, strict in a) for a in alts)


@pytest.mark.parametrize("text", READER_CASES)
def test_the_reader_agrees_with_symbounds_parser(text):
    assert _kernel_reader(text) == _prover(text)


def test_the_reader_by_hand():
    lo, hi, k, alts = kp.read_property(READER_CASES[2])
    assert lo == [Fraction(-3, 20)] and hi == [Fraction(1, 2)] and k == 2 and len(alts) == 4
    # (- Y_0 Y_1) < (- 2): Y_0 - Y_1 + 2 < 0, in every alternative
    assert all(([(0, 1), (1, -1)], 2, True) in [(sorted(cs), c, s) for cs, c, s in a] for a in alts)


@pytest.mark.parametrize("text, words", [
    ("(declare-const X_0 Real)(assert (<= X_0 (__import__ 1)))", "unsupported term"),
    ("(declare-const X_0 Real)(assert (<= X_0 1)", "unbalanced"),
    ("(declare-const X_0 Real))", "unbalanced"),
    ("(declare-const X_0 Real)(declare-const Y_0 Real)(assert (<= X_0 1))(assert (>= X_0 0))"
     "(assert (<= (+ X_0 Y_0) 1))", "not a bound of one input"),
    ("(declare-const X_0 Real)(declare-const Y_0 Real)(assert (<= X_0 1))(assert (>= X_0 0))"
     "(assert (or (<= X_0 1) (<= Y_0 0)))", "names an input"),
    ("(declare-const X_0 Real)(assert (<= X_1 1))", "not declared"),
    ("(declare-const X_0 Real)(declare-const Y_0 Real)(assert (<= (* X_0 X_0) 1))", "unsupported term"),
    ("(declare-const X_0 Real)(assert (<= X_0 1))", "bounded from both sides"),
    ("(declare-const X_0 Real)(assert (<= X_0 0))(assert (>= X_0 1))", "bounded from both sides"),
    ("(declare-const X_1 Real)(assert (<= X_1 0))(assert (>= X_1 0))", "without gaps"),
    ("(declare-const X_0 Real)(declare-const X_0 Real)", "unsupported"),
    ("(declare-const X_0 Real)(assert (<= X_0 1e))", "not a number"),
    ("(declare-const X_0 Real)(assert (<= X_0 nan))", "not a number"),
    ("(declare-const X_0 Real)(assert (<= (+ X_0 X_0) 1))(assert (>= (- X_0 1) 0))(assert (<= (+ X_0 1 (* 1 X_0)) 1))"
     "(eval 1)", "unsupported command"),
    ("(declare-const X_0 Real)(assert (<= (+ X_0 (* 0 X_0) 0) 1))(assert (>= 0 (- 1 X_0 X_0)))(assert (<= 1 2 3))",
     "not a comparison"),
])
def test_the_reader_refuses(text, words):
    with pytest.raises(Rejected, match=words.replace("(", r"\(")):
        kp.read_property(text)


def test_a_linear_combination_is_one_taylor_model():
    """``Y_1 - Y_0 - 1/2 <= 0`` with ``Y_0 = Y_1 = delta`` over ``|delta| <= 1`` is false
    everywhere (the value is 1/2), though output by output the ranges [-1, 1] cannot show it."""
    ys = {0: taylor.TM(arb(0), [arb(1)], arb(0)), 1: taylor.TM(arb(0), [arb(1)], arb(0))}
    h = [arb(1)]
    assert kp._false(ys, [(1, Fraction(1)), (0, Fraction(-1))], Fraction(1, 2), False, h, 1)
    assert kp._false(ys, [(1, Fraction(1)), (0, Fraction(-1))], Fraction(1, 2), True, h, 1)
    assert kp._false(ys, [(1, Fraction(1)), (0, Fraction(-1))], Fraction(0), True, h, 1)  # 0 < 0 is false
    assert not kp._false(ys, [(1, Fraction(1)), (0, Fraction(-1))], Fraction(0), False, h, 1)  # 0 <= 0 holds
    assert not kp._false(ys, [(1, Fraction(1))], Fraction(1, 2), False, h, 1)  # delta + 1/2 <= 0 at delta = -1


NO_READOUT_SPEC = "".join(f"(declare-const X_{i} Real)" for i in range(2)) + "".join(
    f"(declare-const Y_{j} Real)" for j in range(9)) + (
    "\n(assert (and (>= X_0 0) (<= X_0 1/2) (>= X_1 0.25) (<= X_1 1)))\n"
    "(assert (or (and (>= (- Y_0 Y_1) 4)) (and (<= (+ Y_0 (* 2 Y_2)) -7) (>= Y_8 -100))))\n")


def test_a_model_without_readout_its_outputs_column_by_column(capsys, tmp_path):
    """Every entry of Z_L is an output, Y_{jD + r} = Z_L[r, j]; the kernel and the prover accept the
    certificate, and the kernel rejects it when the outputs are relabelled (Y_1 read as another entry)."""
    m = json.loads((DATA / "residual_model.json").read_text())
    del m["readout"]
    (tmp_path / "m.json").write_text(json.dumps(m))
    (tmp_path / "p.vnnlib").write_text(NO_READOUT_SPEC)
    code, out, err = run_cli(capsys, "certify", "--model", str(tmp_path / "m.json"), "--spec",
                             str(tmp_path / "p.vnnlib"), "--out", str(tmp_path / "c.json"), "--timeout", "120")
    assert code == 0, err
    code, out, err = run_cli(capsys, "check", str(tmp_path / "c.json"), "--quiet")
    assert code == 0 and "independent kernel: accepted: " in out, err
    cert = json.loads((tmp_path / "c.json").read_text())
    cert["property"] = cert["property"].replace("(declare-const Y_8 Real)", "")
    redigest(cert)
    ok, reason = _kernel(cert, tmp_path)
    assert not ok and ("not declared" in reason or "outputs" in reason), reason


def test_symbounds_check_reports_the_kernel_on_property_certificates(capsys, monkeypatch):
    path = str(FOLDER / "accepted.json")
    code, out, err = run_cli(capsys, "check", path, "--quiet")
    assert code == 0 and "property certificate valid" in out and "independent kernel: accepted: 17 leaves" in out
    assert "not run" not in out

    def reject(cert, progress=None, **_):
        raise Rejected("no")

    monkeypatch.setattr(symbounds_kernel, "check_property", reject)
    code, out, err = run_cli(capsys, "check", path, "--quiet")
    assert code == 1 and "property certificate valid" in out and "independent kernel: rejected: no" in out
    assert err.strip() == "symbounds: certificate rejected by the independent kernel: no"
    code, out, err = run_cli(capsys, "check", str(FOLDER / "leaf_dropped.json"), "--quiet")
    assert code == 1 and "independent kernel: rejected: no" in out and len(err.strip().splitlines()) == 1


def test_an_input_fixed_to_a_point_and_a_leaf_off_that_point(capsys, tmp_path):
    """``(= X_1 1/2)``: the box has an axis of width 0; the leaves cover it, and a leaf moved off
    ``X_1 = 1/2`` lies outside the box."""
    (tmp_path / "p.vnnlib").write_text((DATA / "holds.vnnlib").read_text().replace(
        "(assert (and (>= X_1 0) (<= X_1 1)))", "(assert (= X_1 1/2))"))
    code, out, err = run_cli(capsys, "certify", "--model", str(DATA / "residual_model.json"), "--spec",
                             str(tmp_path / "p.vnnlib"), "--out", str(tmp_path / "c.json"), "--timeout", "120")
    assert code == 0, err
    cert = json.loads((tmp_path / "c.json").read_text())
    assert all(leaf[0][1] == leaf[1][1] == "1/2" for leaf in cert["leaves"])
    ok, reason = symbounds_kernel.check_file(str(tmp_path / "c.json"))
    assert ok, reason
    cert["leaves"][0][0][1] = cert["leaves"][0][1][1] = "5/8"
    ok, reason = _kernel(cert, tmp_path, "moved.json")
    assert not ok and "leaf 0 is not a box inside" in reason, reason


# ------------------------------------------------------------------------------------------
# found by mutation testing: the leaves' bisection and each constraint's test


class _Coordinate:
    """A fake network whose one output is the input ``x_j`` itself (an exact Taylor model: centre
    the box's midpoint, slope e_j); records every box it is asked about."""

    def __init__(self, j, d):
        self.j, self.d, self.seen = j, d, []

    def taylor(self, lo, hi):
        self.seen.append((list(lo), list(hi)))
        c = arb((lo[self.j] + hi[self.j]).numerator) / (lo[self.j] + hi[self.j]).denominator / 2
        return [taylor.TM(c, [arb(int(i == self.j)) for i in range(self.d)], arb(0))]

    def __call__(self, lo, hi):
        """The outputs by index, as the property check asks for them."""
        return {0: self.taylor(lo, hi)[0]}


def _alt(w, const, strict):
    """One alternative of one constraint ``w Y_0 + const <= 0`` (``< 0`` if strict)."""
    return [[([(0, Fraction(w))], Fraction(const), strict)]]


F = Fraction


def test_a_leaf_is_decided_from_its_exact_half_widths():
    """Y_0 = X_0 on [0, 1]: ``Y_0 >= 1 + 1/10`` is unreachable from the one enclosure [0, 1] (too
    wide a half-width would not show it), ``Y_0 >= 9/10`` is reachable (at X_0 = 1) and must not
    be proved with any number of splits (too narrow a half-width would)."""
    assert kp._unsafe_unreachable(_Coordinate(0, 1), _alt(-1, F(11, 10), False), [F(0)], [F(1)], 0)
    assert not kp._unsafe_unreachable(_Coordinate(0, 1), _alt(-1, F(9, 10), False), [F(0)], [F(1)], 4)


def test_a_strict_constraint_touching_zero_is_false_and_a_constant_constraint_is_read():
    """At the point X_0 = 0 (an exact enclosure 0) ``Y_0 < 0`` is false and ``Y_0 <= 0`` is not; a
    constraint with no output, ``1 <= 0``, is false on every box."""
    net = _Coordinate(0, 1)
    assert kp._unsafe_unreachable(net, _alt(1, 0, True), [F(0)], [F(0)], 0)
    assert not kp._unsafe_unreachable(net, _alt(1, 0, False), [F(0)], [F(0)], 3)
    assert kp._unsafe_unreachable(net, [[([], F(1), False)]], [F(0)], [F(1)], 0)


def test_the_leaves_bisection_halves_the_widest_side_exactly_and_counts_depth():
    """Y_0 = X_0 on [0, 1] x [1/2, 5/8] (widths 1 and 1/8; the second side has the larger ends).
    The unsafe region ``3/8 + 1/100 <= Y_0 <= 3/8 - 1/100`` is empty, but neither constraint is
    false on a box around 3/8: three halvings of side 0 are needed (at 1/2, 1/4, then 3/8), seven boxes in
    all, by hand; with two splits the box
    [1/4, 1/2] is left undecided and the second half is never looked at."""
    empty = [[([(0, F(-1))], F(3, 8) + F(1, 100), False), ([(0, F(1))], -(F(3, 8) - F(1, 100)), False)]]
    lo, hi = [F(0), F(1, 2)], [F(1), F(5, 8)]
    net = _Coordinate(0, 2)
    assert kp._unsafe_unreachable(net, empty, lo, hi, 3)
    y = [F(1, 2), F(5, 8)]
    seen = [([0, y[0]], [1, y[1]]), ([0, y[0]], [F(1, 2), y[1]]), ([0, y[0]], [F(1, 4), y[1]]),
            ([F(1, 4), y[0]], [F(1, 2), y[1]]), ([F(1, 4), y[0]], [F(3, 8), y[1]]), ([F(3, 8), y[0]], [F(1, 2), y[1]]),
            ([F(1, 2), y[0]], [1, y[1]])]
    assert net.seen == seen
    net = _Coordinate(0, 2)
    assert not kp._unsafe_unreachable(net, empty, lo, hi, 2)
    assert net.seen == seen[:4]
    # the same with the two sides swapped (Y_0 = X_1): the halves of side 1 keep side 0's ends
    net = _Coordinate(1, 2)
    assert kp._unsafe_unreachable(net, empty, lo[::-1], hi[::-1], 3)
    assert net.seen == [(a[::-1], b[::-1]) for a, b in seen]
