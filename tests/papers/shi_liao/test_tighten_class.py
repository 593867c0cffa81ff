"""``symbounds tighten --class``: the smallest constants with which the class certificate still
holds, both sides re-checked independently of the search (the class certificate at the minimum,
the worst target's own network refuted below it, at half the minimum the class refuted)."""

import json
from fractions import Fraction

import flint
import pytest
from cli_helpers import run_cli

from symbounds.core.boxes import point_error
from symbounds.core.expr import parse_target
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.papers.shi_liao.constants import Instance, constants
from symbounds.papers.shi_liao.construction import build

EPS = "1/2"


@pytest.fixture(scope="module")
def tightened():
    import contextlib
    import io

    from symbounds.app.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["tighten", "--class", "--what", "Mg", "--eps", EPS, "--quiet", "--json"])
    assert code == 0
    rep = json.loads(out.getvalue())
    (r,) = rep["results"]
    return r


def _class_exit(capsys, mg):
    code, out, _ = run_cli(capsys, "certify", "--holder-class", "--eps", EPS, "--Mg", mg, "--quiet", "--json")
    return code, json.loads(out)


def test_minimum_passes_and_half_of_it_is_refuted(tightened, capsys):
    r = tightened
    assert r["criterion"] == "class" and r["below_status"] == "fail"
    mn = Fraction(r["minimum"])
    assert 1 < float(r["slack"]) and Fraction(r["paper"]) / mn == pytest.approx(float(r["slack"]), rel=1e-4)
    code, rep = _class_exit(capsys, r["minimum"])
    assert code == 0 and rep["verdict"] == "proved"
    code, rep = _class_exit(capsys, str(mn / 2))
    assert code == 1 and rep["verdict"] == "refuted"
    # the worst target at half the minimum, on its own network: its error at x* exceeds eps
    g0, x = rep["worst"]["target"], tuple(Fraction(v) for v in rep["worst"]["x"])
    model = model_from_json(model_to_json(build(constants(Instance(eps=EPS, target=g0, M_g=mn / 2))), 192))
    assert point_error(model, parse_target(g0, 1), 1, x, 256) > flint.arb(1) / 2


def test_step_below_is_refuted_by_the_worst_targets_own_certificate(tightened, capsys):
    r = tightened
    ev = r["below_evidence"]
    assert ev["certify_target"]["verdict"] == "refuted" and ev["certify_target"]["counterexample"]
    code, out, _ = run_cli(capsys, "certify", "--target", ev["target"], "--eps", EPS, "--Mg", r["below"], "--quiet")
    assert code == 1 and "counterexample" in out
    assert r["recheck_minimum"].startswith("symbounds certify --holder-class")


def test_class_minimum_is_at_least_the_sine_targets_domain_minimum(tightened, capsys):
    """Every target of the class needs at most what the class needs: the domain minimum of the
    default sine target (a member of the class) lies at or below the class minimum."""
    code, out, _ = run_cli(capsys, "tighten", "--criterion", "domain", "--what", "Mg", "--eps", EPS, "--quiet",
                           "--json")
    assert code == 0
    (d,) = json.loads(out)["results"]
    assert Fraction(d["minimum"]) <= Fraction(tightened["minimum"])


@pytest.mark.slow
def test_default_instance_half_the_class_minimum_is_refuted(capsys):
    """At the default instance (eps = 1/10): the class minimum of M_g certifies, half of it is refuted."""
    code, out, _ = run_cli(capsys, "tighten", "--class", "--what", "Mg", "--resolution", "1/20", "--quiet", "--json")
    assert code == 0
    (r,) = json.loads(out)["results"]
    mn = Fraction(r["minimum"])
    code, _, _ = run_cli(capsys, "certify", "--holder-class", "--Mg", r["minimum"], "--quiet")
    assert code == 0
    code, out, _ = run_cli(capsys, "certify", "--holder-class", "--Mg", str(mn / 2), "--quiet")
    assert code == 1 and "verdict: refuted" in out
