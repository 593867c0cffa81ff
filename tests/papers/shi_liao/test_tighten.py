"""``symbounds tighten``: both sides of each reported minimum re-checked independently.

A minimum ``v`` must pass (``symbounds certify --M v`` exits 0) and ``v (1 - 2R)`` must fail
with a counterexample (exit 1); the proof criterion's binding budget claim is recomputed from
its formula in Arb, outside the claims module; the search itself is checked on synthetic,
non-monotone criteria whose answer is known by hand.
"""

import contextlib
import io
import json
import math
from fractions import Fraction

import flint
import pytest
from cli_helpers import run_cli  # noqa: E402

from symbounds.app.cli import main
from symbounds.core.boxes import point_error
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao import tighten as tg

EPS = "1/2"
INST = ["--eps", EPS, "--quiet"]
R = Fraction(1, 100)


def _tighten_json(capsys, *argv):
    code, out, err = run_cli(capsys, "tighten", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _frac(text):
    return Fraction(text)


@pytest.fixture(scope="module")
def half():
    """One run of ``tighten --what M,Mg`` (both criteria) at eps = 1/2 (P = 8), by criterion."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["tighten", "--what", "M,Mg", "--json", *INST])
    assert code == 0
    data = json.loads(buf.getvalue())
    data["by"] = {(r["constant"], r["criterion"]): r for r in data["results"]}
    return data


# ------------------------------------------------------------------------------------------
# exact numbers


def test_round_sig_and_exact_text_by_hand():
    assert tg.round_sig(Fraction(12345), 3, up=True) == 12400
    assert tg.round_sig(Fraction(12345), 3, up=False) == 12300
    assert tg.round_sig(Fraction(1, 3), 2) == Fraction(33, 100)
    assert tg.round_sig(Fraction(999, 1000), 2, up=True) == 1
    assert tg.exact_text(Fraction(3, 8)) == "0.375"
    assert tg.exact_text(Fraction(1, 3)) == "1/3"
    assert tg.exact_text(Fraction(308) * Fraction(99, 100)) == "304.92"
    assert tg.exact_text(Fraction(40)) == "40"


# ------------------------------------------------------------------------------------------
# acceptance: the domain minimum passes on the command line, two steps below fails


def _counterexample_check(inst, x, below_inst):
    """|T(x) - g(x)| > eps at x, evaluated on the exact network at 256 bits (not the model file)."""
    K = sl.constants(below_inst)
    err = point_error(sl.build(K), K.g, inst.d, tuple(Fraction(v) for v in x), 256)
    assert err > flint.arb(flint.fmpq(inst.eps.p, inst.eps.q))


@pytest.mark.parametrize("constant, flag", [("M", "--M"), ("Mg", "--Mg")])
def test_domain_minimum_passes_and_two_steps_below_fails(capsys, half, constant, flag):
    r = half["by"][(constant, "domain")]
    v = _frac(r["minimum"])
    assert _frac(r["below"]) == v * (1 - R)
    assert r["below_status"] == "fail" and r["paper_status"] == "pass"
    # the slack is paper / minimum, and the derived value is far above the minimum
    assert abs(Fraction(r["slack"]) - Fraction(r["paper"]) / v) < Fraction(1, 10**4) * Fraction(r["slack"])
    assert Fraction(r["slack"]) > 2
    # both sides from the command line
    code, out, _ = run_cli(capsys, "certify", *INST, flag, r["minimum"])
    assert code == 0 and "verdict: proved" in out
    code, out, _ = run_cli(capsys, "certify", *INST, flag, tg.exact_text(v * (1 - 2 * R)))
    assert code == 1 and "counterexample" in out
    # the reported counterexample of the step below, recomputed on the exact network
    inst = sl.Instance(eps=Fraction(1, 2))
    kw = {"M": r["below"]} if constant == "M" else {"M_g": r["below"]}
    _counterexample_check(inst, r["below_evidence"]["x"], sl.Instance(eps=Fraction(1, 2), **kw))


def _E3(inst, M):
    """E3's two sides from its formula in Arb (P, M_g, c as in the paper), not from the claims."""
    K = sl.constants(inst)
    P, d = K.P, inst.d
    with flint.ctx.workprec(256):
        q = lambda v: flint.arb(flint.fmpq(int(Fraction(v).numerator), int(Fraction(v).denominator)))
        B, eps = q(str(inst.B)), q(str(inst.eps))
        r_g = eps / (4 * q(str(inst.C_H)))
        M_g = (8 * B * P / eps).log() / (3 * r_g**2)
        c = 1 - flint.arb.cos_pi(flint.arb(2) / P)
        e = (-c * q(M)).exp()
        lhs = 2 * (P - 1) * B * e + B * ((12 * d * (P - 1) * M_g * e).exp() - 1)
        return lhs, eps / 4


def test_proof_minimum_is_at_least_the_domain_minimum_and_E3_binds(half):
    proof, domain = half["by"][("M", "proof")], half["by"][("M", "domain")]
    assert _frac(proof["minimum"]) >= _frac(domain["minimum"])
    chk = next(c for c in half["consistency"] if c["constant"] == "M")
    assert chk["holds"] is True and chk["binding_claim"] == "E3" and "stronger than needed" in chk["explanation"]
    assert proof["below_evidence"]["claim"] == "E3"
    inst = sl.Instance(eps=Fraction(1, 2))
    lhs, rhs = _E3(inst, proof["minimum"])
    assert lhs <= rhs
    lhs, rhs = _E3(inst, proof["below"])
    assert lhs > rhs
    # the derived M satisfies E3 (it is where the paper's bound puts it)
    assert _frac(proof["minimum"]) <= Fraction(proof["paper"]) * Fraction(1001, 1000)


def test_Mg_proof_minimum_is_the_derived_value_because_E2_is_tight(half):
    # E2: 2 B P exp(-3 M_g r_g^2) <= eps/4  <=>  M_g >= log(8 B P / eps) / (3 r_g^2), the derived value
    r = half["by"][("Mg", "proof")]
    paper = Fraction(r["paper"])
    # the derived value from its formula: P = 8, r_g = 1/16, B = 2, eps = 1/2
    assert abs(paper - Fraction(math.log(8 * 2 * 8 / 0.5) * 256 / 3)) < Fraction(1, 10**6)
    chk = next(c for c in half["consistency"] if c["constant"] == "Mg")
    assert chk["holds"] is True and chk["binding_claim"] == "E2"
    assert _frac(r["minimum"]) >= paper * Fraction(999999, 1000000)
    assert _frac(r["minimum"]) <= paper * Fraction(101, 100)
    assert _frac(r["below"]) < paper
    assert r["below_evidence"]["claim"] == "E2"


def test_grid_minimum_domain():
    inst = sl.Instance(eps=Fraction(1, 4))
    r = tg.tighten(inst, "grid", "domain")
    assert r.paper == 16  # m = ceil(1 / (2 * (1/4)/8)) = 16
    assert r.minimum_outcome.status == "pass" and r.below == r.minimum - 1
    assert r.below_outcome.status == "fail"
    K = tg.grid_constants(inst, r.below)
    assert K.P == r.below and [c[0] for c in K.centres] == [Fraction(2 * i - 1, 2 * K.P) for i in range(1, K.P + 1)]
    err = point_error(sl.build(K), K.g, 1, tuple(Fraction(v) for v in r.below_outcome.evidence["x"]), 256)
    assert err > flint.arb(0.25)
    # the grid's M_g uses its covering radius r = 1/(2m): log(8 B P / eps) / (3 r^2), B = 2, eps = 1/4
    m = r.minimum
    expect = math.log(8 * 2 * m / 0.25) * (4 * m * m) / 3
    got = float(tg.grid_constants(inst, m).defs[sl.SYM["M_g"]].evalf(30))
    assert abs(got - expect) < 1e-12 * expect


# ------------------------------------------------------------------------------------------
# the search on synthetic criteria (answers known by hand)


def _synthetic(monkeypatch, status_of, paper=Fraction(1000)):
    monkeypatch.setattr(tg, "paper_value", lambda inst, c, prec=256: (paper, str(paper)))

    def fake(inst, constant, criterion, value, opts):
        v = paper if value is None else Fraction(value)
        s = status_of(v)
        return tg.Outcome(value, s, {"x": ["0"], "error": "1"} if s == "fail" else {})

    monkeypatch.setattr(tg, "evaluate", fake)


def test_search_monotone(monkeypatch):
    _synthetic(monkeypatch, lambda v: "pass" if v >= 37 else "fail")
    r = tg.tighten(sl.Instance(), "M", "domain")
    assert 37 <= r.minimum <= Fraction(37) / Fraction(99, 100)
    assert r.below == r.minimum * Fraction(99, 100) and r.below < 37
    assert r.flips == [] and r.undecided == []


def test_search_non_monotone_reports_the_flip_and_the_lower_minimum(monkeypatch):
    # passes above 300 and again on [20, 40): the scan sees fail at ~250..62 and pass at ~31
    _synthetic(monkeypatch, lambda v: "pass" if v >= 300 or 20 <= v < 40 else "fail")
    r = tg.tighten(sl.Instance(), "M", "domain")
    assert 20 <= r.minimum <= Fraction(20) / Fraction(99, 100)
    assert r.below_outcome.status == "fail"
    assert r.flips, "the pass below a failure must be reported"
    fails, passes = r.flips[0]
    assert fails.status == "fail" and passes.status == "pass" and passes.value < fails.value


def test_search_undecided_is_never_a_pass(monkeypatch):
    # fails below 50, undecided on [50, 60), passes from 60: the minimum must be a certified pass
    _synthetic(monkeypatch, lambda v: "pass" if v >= 60 else ("undecided" if v >= 50 else "fail"))
    r = tg.tighten(sl.Instance(), "M", "domain")
    assert r.minimum >= 60 and r.minimum_outcome.status == "pass"
    assert r.undecided and all(50 <= o.value < 60 for o in r.undecided)


def test_search_step_below_passes_continues_downwards(monkeypatch):
    # a narrow passing window just under a failing band: found by the check one step below
    _synthetic(monkeypatch, lambda v: "pass" if v >= 100 or Fraction(98) <= v < Fraction(99) else "fail")
    r = tg.tighten(sl.Instance(), "M", "domain")
    assert r.minimum_outcome.status == "pass" and r.below_outcome.status == "fail"
    assert r.minimum >= 98


# ------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("argv, fragment", [
    (["--resolution", "0"], "--resolution"),
    (["--resolution", "1/2"], "--resolution"),
    (["--resolution", "-1/10"], "--resolution"),
    (["--resolution", "abc"], "--resolution"),
    (["--what", "Q"], "unknown constant"),
    (["--what", "M,foo"], "unknown constant"),
    (["--what", "grid", "--criterion", "proof"], "no meaning"),
    (["--what", "M", "--map"], "--map"),
    (["--criterion", "tight"], "criterion"),
    (["--eps", "2"], "eps"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = run_cli(capsys, "tighten", "--quiet", *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("symbounds: error:") and fragment in err


def test_text_report_and_out_file(tmp_path, capsys):
    path = tmp_path / "t.txt"
    code, out, _ = run_cli(capsys, "tighten", "--eps", "1/4", "--what", "grid", "--quiet", "--out", str(path))
    assert code == 0 and out == ""
    text = path.read_text()
    assert "grid" in text and "domain" in text and "|T - g|" in text


# ------------------------------------------------------------------------------------------
# the default instance (eps = 1/10, P = 40)


@pytest.mark.slow
@pytest.mark.parametrize("constant, flag", [("M", "--M"), ("Mg", "--Mg")])
def test_default_instance_acceptance(capsys, constant, flag):
    data = _tighten_json(capsys, "--what", constant, "--criterion", "domain", "--quiet")
    (r,) = data["results"]
    v = _frac(r["minimum"])
    if constant == "M":
        assert 50 < v < 300  # M = 50 fails and M = 300 passes on samples
    assert run_cli(capsys, "certify", "--quiet", flag, r["minimum"])[0] == 0
    assert run_cli(capsys, "certify", "--quiet", flag, tg.exact_text(v * Fraction(98, 100)))[0] == 1


def test_map_of_M_and_Mg(capsys):
    data = _tighten_json(capsys, "--what", "M,Mg", "--criterion", "domain", "--map", "--map-steps", "3", *INST)
    grid = data["map"]
    assert len(grid["cells"]) == len(grid["Mg_values"]) * len(grid["M_values"]) == 9
    assert [Fraction(v) for v in grid["M_values"]] == sorted((Fraction(v) for v in grid["M_values"]), reverse=True)
    # the lowest M is half the minimum (rounded), below it: a failure; each failure re-checked on the exact network
    assert Fraction(grid["M_values"][-1]) < Fraction(data["results"][0]["minimum"])
    inst = sl.Instance(eps=Fraction(1, 2))
    fails = [c for c in grid["cells"] if c["status"] == "fail"]
    assert fails
    for c in fails[:2]:
        _counterexample_check(inst, c["evidence"]["x"], sl.Instance(eps=Fraction(1, 2), M=c["M"], M_g=c["Mg"]))
    # the pair (derived M_g, derived M), rounded to 3 digits, is the top left corner: it passes
    assert grid["cells"][0]["status"] == "pass"
