"""``symbounds tighten --what tau``: the largest certified softmax temperature, both sides re-checked.

tau* must be a certified pass of ``symbounds interp --attention softmax --tau tau*`` (exit 0) and
the step above, ``tau* (1 + R)``, a certified refutation (exit 1); an mpmath evaluation of the
network at both temperatures (another arithmetic, no certificate code) must agree: every output
token within 1e-20 of a target at tau*, some token far from every target above.  The search is
also checked on synthetic criteria: an undecided step is never a pass.
"""

import json
from fractions import Fraction

import pytest
from cli_helpers import run_cli  # noqa: E402

from symbounds.core.contexts import MPContext
from symbounds.papers.alcalde import tighten as tt
from symbounds.papers.alcalde.dataset import dataset_to_json, random_dataset
from symbounds.papers.alcalde.softmax import ball_forward, build_softmax

RANDOM = "2,4,2,2"
R = Fraction(1, 100)


def _max_distance(ds, tau) -> float:
    """Largest sup-distance of an output token to the nearest target of its sequence, in mpmath
    (200 bits) through the generic forward pass: no certificate code involved."""
    con = build_softmax(ds, tau, 0)
    ctx = MPContext(200)
    worst = 0.0
    for X, Y in zip(ds.inputs, ds.targets):
        Z = ball_forward(ctx, con.model, [[ctx.convert(v) for v in x] for x in X])
        for z in Z:
            dist = min(max(abs(float(a - ctx.convert(b))) for a, b in zip(z, y)) for y in Y)
            worst = max(worst, dist)
    return worst


def test_tau_star_both_sides_certified_through_the_cli(capsys):
    code, out, err = run_cli(capsys, "tighten", "--what", "tau", "--random", RANDOM, "--json", "--quiet")
    assert code == 0, err
    rep = json.loads(out)
    tau_star, above = Fraction(rep["tau_star"]), Fraction(rep["above"]["tau"])
    assert rep["tight"] is True and rep["tau_construction"] == "1/64"
    assert rep["construction_status"] == "pass"
    assert above == tau_star * (1 + R)
    assert tau_star > Fraction(1, 64)
    assert rep["star"]["X1"] == "proved" and rep["star"]["I1"] == "proved"
    assert rep["above"]["status"] == "fail" and "refuted" in (rep["above"]["X1"], rep["above"]["I1"])
    # both sides, re-checked by the interpolation command itself
    code, out, err = run_cli(capsys, "interp", "--attention", "softmax", "--random", RANDOM, "--tau", rep["tau_star"])
    assert code == 0, out + err
    code, out, err = run_cli(capsys, "interp", "--attention", "softmax", "--random", RANDOM, "--tau",
                             rep["above"]["tau"], "--json")
    assert code == 1
    claims = {c["id"]: c["verdict"] for c in json.loads(out)["claims"]}
    assert claims["X1"] == "refuted"
    # and by plain mpmath evaluation of the same networks
    ds = random_dataset(*map(int, RANDOM.split(",")), seed=0)
    assert _max_distance(ds, tau_star) < 1e-20
    assert _max_distance(ds, above) > 1e-3
    # the bracket the search ended on: every value in the report that passed is <= tau*, and the
    # evaluations above tau* (other than flips, none here) did not pass
    for o in rep["scan"] + rep["bisection"]:
        if o["status"] == "pass":
            assert Fraction(o["tau"]) <= tau_star
        else:
            assert Fraction(o["tau"]) > tau_star
    assert rep["flips"] == [] and rep["undecided"] == []


def test_text_report_names_both_sides(capsys):
    code, out, _ = run_cli(capsys, "tighten", "--what", "tau", "--random", RANDOM, "--resolution", "1/10", "--quiet")
    assert code == 0
    assert "tau used by the construction" in out and "1/64" in out
    assert "step above" in out and "refuted" in out
    assert out.strip().endswith("verdict: tight (tau* certified, the step above refuted)")


def test_a_dataset_file_gives_the_same_tau_star(capsys, tmp_path):
    ds = random_dataset(*map(int, RANDOM.split(",")), seed=0)
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(dataset_to_json(ds)))
    runs = []
    for src in (["--data", str(path)], ["--random", RANDOM]):
        code, out, err = run_cli(capsys, "tighten", "--what", "tau", *src, "--resolution", "1/10", "--json", "--quiet")
        assert code == 0, err
        runs.append(json.loads(out))
    assert runs[0]["tau_star"] == runs[1]["tau_star"] and runs[0]["dataset"]["source"] == str(path)


def _synthetic(monkeypatch, status_of):
    def fake(ds, tau, opts=None):
        s = status_of(Fraction(tau))
        v = {"pass": "proved", "fail": "refuted", "undecided": "undecided"}[s]
        return tt.TauOutcome(Fraction(tau), s, v, v, v)

    monkeypatch.setattr(tt, "evaluate_tau", fake)


def test_undecided_is_never_a_pass(monkeypatch):
    # passes below 5, undecided on [5, 6), refuted from 6 on: tau* is below 5 and the result is not tight
    _synthetic(monkeypatch, lambda t: "pass" if t < 5 else ("undecided" if t < 6 else "fail"))
    res = tt.tighten_tau(None, tt.TauOptions(resolution=R))
    assert res.tau_star < 5 and res.tau_star * (1 + R) >= 5
    assert res.above_outcome.status == "undecided" and not res.tight
    assert res.undecided and all(5 <= o.tau < 6 for o in res.undecided)
    assert "undecided" in res.note


def test_construction_tau_failing_searches_downward(monkeypatch):
    # refuted already at 1/64: halvings find a pass, then the bisection; answer 1/1000 by hand
    _synthetic(monkeypatch, lambda t: "pass" if t <= Fraction(1, 1000) else "fail")
    res = tt.tighten_tau(None, tt.TauOptions(resolution=R))
    assert res.construction_outcome.status == "fail"
    assert res.tight and res.tau_star <= Fraction(1, 1000) < res.tau_star * (1 + R)
    assert res.slack < 1


def test_a_pass_one_step_above_continues_the_search(monkeypatch):
    # passes below 100 and on [100.3, 101), refuted elsewhere.  By hand: doublings 1/64 .. 64 pass,
    # 128 fails; midpoints 96 (pass), 112, 104, 100 (fail), 98, 99, 99.5 (pass) close the bracket
    # [99.5, 100]; the step above, 99.5 * 1.01 = 100.495, passes (a flip), so the search goes on from
    # it: the midpoints toward 104, 102.2475 and 101.37125, fail and close [100.495, 101.37125],
    # and the step above 100.495, 101.49995, fails: tau* = 100.495.
    _synthetic(monkeypatch, lambda t: "pass" if t < 100 or Fraction(1003, 10) <= t < 101 else "fail")
    res = tt.tighten_tau(None, tt.TauOptions(resolution=R))
    assert res.tight and res.tau_star == Fraction(20099, 200)
    assert [(a.tau, b.tau) for a, b in res.flips] == [(100, Fraction(199, 2) * (1 + R))]


@pytest.mark.parametrize("argv", [
    ["--what", "tau"],
    ["--what", "tau", "--random", "2,4,2,2", "--data", "x.json"],
    ["--what", "tau,M", "--random", "2,4,2,2"],
    ["--what", "tau", "--random", "2,4,2,2", "--eps", "0.1"],
    ["--what", "tau", "--random", "2,4,2,2", "--criterion", "domain"],
    ["--what", "tau", "--random", "2,4,2,2", "--map"],
    ["--what", "tau", "--random", "2,4,2"],
    ["--what", "tau", "--random", "2,4,1,2"],
    ["--what", "tau", "--random", "2,4,2,2", "--resolution", "1/2"],
    ["--what", "tau", "--data", "/nonexistent/ds.json"],
    ["--what", "M", "--random", "2,4,2,2"],
    ["--what", "Mg", "--seed", "3"],
    ["--what", "sigma"],
])
def test_bad_combinations_exit_2(capsys, argv):
    code, out, err = run_cli(capsys, "tighten", *argv)
    assert code == 2 and out == ""
    assert err.startswith("symbounds: error: ") and err.count("\n") == 1
