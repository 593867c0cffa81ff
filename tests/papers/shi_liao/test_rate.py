"""The generalisation calculator against hand computations (mpmath, exact fractions) and against
the largest weight of the network actually built at the same eps."""

import argparse
import io
import json
import math
from contextlib import redirect_stdout
from fractions import Fraction

import mpmath
import pytest

from symbounds.core.contexts import BallContext
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.rate import add_rate_arguments, lipschitz_in_parameters, rate_report, run_rate
from symbounds.papers.shi_liao.run import max_weight

mp = mpmath.MPContext()
mp.prec = 200


def _f(s):
    return mp.mpf(s)


def test_eps_is_dyadic_when_irrational():
    rep = rate_report(1001, 1)
    eps = Fraction(rep["eps"])
    assert eps.denominator == 2**40 or eps.denominator < 2**40
    E = mp.mpf(eps.numerator) / eps.denominator
    assert E < mp.mpf(1001) ** (-mp.mpf(1) / 3) < E + mp.mpf(2) ** -39


def test_a_bound_above_the_trivial_one_is_said_vacuous():
    rep = rate_report(10000, 2)
    assert rep["vacuous"] is True and float(rep["bound"]) > 4
    assert rate_report(10**30, 1)["vacuous"] is False  # eps = 1e-10 exactly


def test_hand_computation_n1000_d1():
    rep = rate_report(1000, 1)
    assert rep["eps"] == "1/10"  # 1000^(-1/3) is exactly 1/10: taken exactly, not rounded
    eps = Fraction(rep["eps"])
    assert rep["rate_exponent"] == "2/3" and rep["eps_exponent"] == "1/3"
    assert rep["m"] == 20 and rep["P"] == 20  # ceil(1/(2 eps/4)) = ceil(20) = 20, exactly
    D = 5
    assert rep["D"] == D and rep["params"] == 8 * D * 22 + 4 * D + 2 * (4 * D * D + 3 * D) == 1130
    E = mp.mpf(eps.numerator) / eps.denominator
    r = E / 4
    P = 20
    M_g = mp.log(8 * P / E) / (3 * r * r)
    c = 1 - mp.cos(2 * mp.pi / P)
    M = mp.log(4 * (P - 1) * (36 * M_g + 2) / E) / c
    W = max(M, 2 * M_g * mp.mpf(39) / 40, M_g * (mp.mpf(39) / 40) ** 2, 1, 2)
    for key, ref in (("M_g", M_g), ("M", M), ("max_weight", W)):
        assert abs(_f(rep[key]) - ref) <= ref * mp.mpf(10) ** -10, key
        assert _f(rep[key]) >= ref * (1 - mp.mpf(10) ** -30)  # an upper bound
    Lam = _f(rep["lipschitz_params"])
    logN = 1130 * mp.log(W * Lam * 1000 + 1)
    assert abs(_f(rep["log_covering"]) - logN) <= logN * mp.mpf(10) ** -10
    bound = 4 * E * E + 4 * ((18 * logN + 72) / 1000 + mp.mpf(32) / 1000)
    assert abs(_f(rep["bound"]) - bound) <= bound * mp.mpf(10) ** -10
    rate = mp.mpf(1000) ** (-mp.mpf(2) / 3) * mp.log(1000)
    assert abs(_f(rep["C4"]) - bound / rate) <= bound / rate * mp.mpf(10) ** -10


@pytest.mark.parametrize("n, d", [(1000, 1), (100, 2)])
def test_max_weight_equals_the_built_network(n, d):
    rep = rate_report(n, d)
    eps = Fraction(rep["eps"])
    inst = sl.Instance(d=d, C_H=1, B=1, eps=eps, target="x1/2")
    K = sl.constants(inst)
    assert K.P == rep["P"]
    model = sl.build(K)
    assert model.count_parameters()[0] == rep["params"]
    ctx = BallContext(128)
    with ctx.scope():
        w = max_weight(model, ctx)
        ref = _f(rep["max_weight"])
        got = mp.mpf(w.mid().str(40, radius=False))
    assert abs(got - ref) <= ref * mp.mpf(10) ** -9


def test_lipschitz_recursion_by_hand():
    # W = 1, D = 5, d = 1, P = 2, delta = 1, by hand with exact fractions.
    W, D, d, P = 1, 5, 1, 2
    a, Dl = W * (1 + d), 1 + d  # 2, 2
    # attention H=4, dk=dv=2
    a1 = 4 * 2 * D * a  # 80
    Dl1 = 4 * 2 * (D * a + (4 * 2 * D**3 * a * a + D) * (a + Dl))  # 8 * (10 + 4005 * 4)
    assert (a1, Dl1) == (80, 8 * (10 + 4005 * 4))
    f = 2 * D
    a2 = f * (D * a1 + 1) + 1
    Dl2 = f * ((D * a1 + 1) + (D * (a1 + Dl1) + 1)) + 1
    a3 = D * a2
    Dl3 = D * a2 + (4 * D**3 * a2 * a2 + D) * (a2 + Dl2)
    Dl4 = f * ((D * a3 + 1) + (D * (a3 + Dl3) + 1)) + 1
    import flint

    with BallContext(256).scope():
        got = lipschitz_in_parameters(flint.arb(1), D, d, P)
        assert got.contains(Dl4) and got.rad() < 1


def test_rates_and_exponents():
    assert rate_report(10**6, 2)["rate_exponent"] == "1/2"
    assert rate_report(10**6, 1, alpha="1/2")["rate_exponent"] == "1/2"
    assert rate_report(10**6, 3)["rate_exponent"] == "2/5"
    # eps(n) = n^(-alpha/(2 alpha + d)): the slope of log eps against log n
    e1, e2 = (float(Fraction(rate_report(n, 2)["eps"])) for n in (10**4, 10**8))
    assert abs(math.log(e2 / e1) / math.log(10**4) + 0.25) < 1e-9
    # P grows like eps^(-d/alpha): P(n) ~ n^(d/(2 alpha + d))
    P1, P2 = (rate_report(n, 2)["P"] for n in (10**6, 10**10))
    assert abs(math.log(P2 / P1) / math.log(10**4) - 0.5) < 0.02
    big = rate_report(10**30, 10)
    assert big["P"] > 10**20 and float(big["M"]) > 0


def _args(*argv):
    p = argparse.ArgumentParser()
    add_rate_arguments(p)
    return p.parse_args(list(argv))


def test_run_rate_json_and_text():
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert run_rate(_args("--n", "1e4", "--d", "2", "--alpha", "1/2", "--noise", "0.5", "--json")) == 0
    rep = json.loads(buf.getvalue())
    for key in ("eps", "P", "params", "max_weight", "log_covering", "rate_exponent", "bound"):
        assert key in rep
    assert rep["n"] == 10000 and rep["noise"] == "1/2" and rep["rate_exponent"] == "1/3"
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert run_rate(_args("--n", "5000")) == 0
    assert "risk bound" in buf.getvalue()


@pytest.mark.parametrize("argv, match", [
    (("--n", "1"), "--n"), (("--n", "1.5"), "integer"), (("--n", "abc"), "not a number"),
    (("--n", "100", "--d", "0"), "--d"), (("--n", "100", "--alpha", "0"), "alpha"),
    (("--n", "100", "--alpha", "2"), "alpha"), (("--n", "100", "--holder", "-1"), "holder"),
    (("--n", "100", "--noise", "0"), "noise"), (("--n", "100", "--bound", "0"), "bound"),
    (("--n", "1" + "0" * 120), "above"),
])
def test_bad_input(argv, match):
    with pytest.raises(ValueError, match=match) as e:
        run_rate(_args(*argv))
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------
# The rate, measured (float64 evidence, seeded): the fitted slope against -2 alpha/(2 alpha + d).

NS = [100, 316, 1000, 3162, 10000, 31623]  # 1.5 decades


@pytest.mark.parametrize("key, d, ambient", [("cube-d1", 1, 1), ("curve-10", 1, 10)])
def test_measured_rate_slope(key, d, ambient):
    from symbounds.papers.shi_liao.empirical import fit_slope, measure

    rows = measure(key, NS, reps=10)
    s = fit_slope(rows)
    assert abs(s - (-2 / (2 + d))) < 0.1, s
    assert rows[-1]["risk"] < rows[0]["risk"] / 10
    if ambient != d:
        assert s < -2 / (2 + ambient) - 0.3  # far steeper than the ambient rate


@pytest.mark.slow
def test_measured_rate_slope_cube_d2():
    from symbounds.papers.shi_liao.empirical import fit_slope, measure

    s = fit_slope(measure("cube-d2", NS, reps=10))
    assert abs(s + 0.5) < 0.1, s
