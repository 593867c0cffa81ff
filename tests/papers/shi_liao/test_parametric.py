"""The parametric constant chain (docs/shi_liao.md, "The constant chain for every parameter").

Every "proved" of ``symbounds chain`` (SymPy steps) is re-derived here by two independent routes:
z3's real arithmetic on the hand-reduced polynomial statement (with exp and log replaced by the
certified bounds the docs state), and 200 random parameter points in 300-bit Arb, each computing
the claim's two sides from the definitions (the ceiling decided in Arb, c = 2 sin^2(pi/P)).  The
refutation of E3 is re-checked by ``symbounds pou`` at the reported point.
"""

import json
import random
from fractions import Fraction

import flint
import pytest
import z3
from cli_helpers import run_cli

from symbounds.papers.shi_liao import parametric
from symbounds.papers.shi_liao.constants import Instance, constants
from symbounds.papers.shi_liao.construction import build


@pytest.fixture(scope="module")
def rows():
    return {r.id: r for r in parametric.chain()}


def test_the_table_verdicts(rows):
    assert [r for r in rows] == ["E0", "E1", "E2", "E3", "L8.1", "L8.2"]
    assert {k: r.verdict for k, r in rows.items()} == {
        "E0": "proved", "E1": "proved", "E2": "proved", "E3": "refuted", "L8.1": "proved", "L8.2": "proved"}
    assert all(ok for r in rows.values() for _, ok in r.steps)
    assert rows["E3"].region == "B >= eps/16, P >= 2" and rows["E3"].refuted_at["P"] == 40


# ------------------------------------------------------------------------------------------
# z3: the reduced statements, with exp/log replaced by the certified bounds


def _unsat(*constraints):
    s = z3.Solver()
    s.set("timeout", 20000)
    s.add(*constraints)
    return s.check() == z3.unsat


def test_z3_e0():
    r, sd, m = z3.Reals("r sd m")
    assert _unsat(r > 0, sd > 0, m >= sd / (2 * r), z3.Not(sd / (2 * m) <= r))


def test_z3_e1():
    # y = 2^alpha <= 2 for alpha <= 1 (exp increasing); w = r_g^alpha with 4 C_H w = eps
    C, eps, y, w = z3.Reals("C eps y w")
    assert _unsat(C > 0, eps > 0, eps < 1, y > 1, y <= 2, w > 0, 4 * C * w == eps, z3.Not(C * y * w <= eps / 2))


def test_z3_e2():
    # w = e^{-3 M_g r_g^2} = e^{-log(8BP/eps)}: w * 8BP/eps = 1
    B, P, eps, w = z3.Reals("B P eps w")
    assert _unsat(B > 0, P >= 2, eps > 0, w > 0, w * 8 * B * P == eps, 2 * B * P * w != eps / 4)


def test_z3_e3_on_its_region():
    B, eps, d, P, Mg, u, t, v = z3.Reals("B eps d P Mg u t v")
    region = [eps > 0, eps < 1, B >= eps / 16, d >= 1, P >= 2, Mg >= 0,
              u * 4 * (P - 1) * B * (36 * d * Mg + 2) == eps, t == 12 * d * (P - 1) * Mg * u]
    # M_g >= 0 on the region: log(8BP/eps) >= 0 because 8BP >= eps
    assert _unsat(eps > 0, eps < 1, B >= eps / 16, P >= 2, 8 * B * P < eps)
    # t lies where the chord bound e^t <= 1 + 3t holds
    assert _unsat(*region, z3.Or(t < 0, t > z3.RealVal("3/2")))
    # with v = e^t <= 1 + 3t the leakage fits in eps/4
    assert _unsat(*region, v <= 1 + 3 * t, z3.Not(2 * (P - 1) * B * u + B * (v - 1) <= eps / 4))


def test_z3_e3_is_not_provable_without_its_region():
    # drop B >= eps/16 and z3 finds parameters where the chord bound's range is left (t > 3/2)
    B, eps, d, P, Mg, u, t = z3.Reals("B eps d P Mg u t")
    s = z3.Solver()
    s.add(eps > 0, eps < 1, B > 0, d >= 1, P >= 2, Mg >= 0,
          u * 4 * (P - 1) * B * (36 * d * Mg + 2) == eps, t == 12 * d * (P - 1) * Mg * u, t > 2)
    assert s.check() == z3.sat


def test_z3_l81():
    # m = ceil(x) >= 2, so x > 1; y = 2^{1/alpha} >= 2 (exp-below on 2^{1/alpha - 1})
    x, m, y = z3.Reals("x m y")
    base = [m >= 2, x <= m, m < x + 1, y >= 2]
    assert _unsat(*base, z3.Not(m < 2 * y * x))
    for d in (1, 2, 3):  # P = m^d < (2 y x)^d = P_paper (monotone powers), checked for small d
        assert _unsat(*base, z3.Not(m**d < (2 * y * x) ** d))


def test_z3_l82():
    D, P, Pp = z3.Reals("D P Pp")
    dense = 8 * D * (P + 2) + 4 * D + 2 * (4 * D * D + 3 * D)
    assert _unsat(D >= 5, P >= 2, Pp >= P, z3.Not(dense <= (8 * D * D + 34 * D) * Pp))


# ------------------------------------------------------------------------------------------
# Arb: 200 random parameter points, each claim's sides from the definitions in 300-bit balls

PREC = 300


def _arb(q: Fraction):
    return flint.arb(q.numerator) / q.denominator


def _ceil(x) -> int:
    n = int(x.mid().floor().unique_fmpz()) + 1
    for k in (n - 1, n, n + 1):
        if x <= k and x > k - 1:
            return k
    raise ArithmeticError("ceiling undecided")


def _sides(d, alpha, C, B, eps):
    """{claim: (lhs, rhs)} from the definitions (docs/shi_liao.md, Constants), in Arb."""
    e, b, c_h, a = _arb(eps), _arb(B), _arb(C), _arb(alpha)
    r = (e / (4 * c_h)) ** (1 / a)
    x = flint.arb(d).sqrt() / (2 * r)
    m = _ceil(x)
    P = m**d
    Mg = (8 * b * P / e).log() / (3 * r**2)
    c = 2 * flint.arb.sin_pi(flint.arb(1) / P) ** 2
    M = (4 * (P - 1) * b * (36 * d * Mg + 2) / e).log() / c
    u = (-c * M).exp()
    D = d + 4
    Pp = flint.arb(d) ** (flint.arb(d) / 2) * (8 * c_h) ** (d / a) * e ** (-d / a)
    dense = 8 * D * (P + 2) + 4 * D + 2 * (4 * D * D + 3 * D)
    t = 12 * d * (P - 1) * Mg * u
    return P, t, {
        "E0": (flint.arb(d).sqrt() / (2 * m), r),
        "E1": (c_h * (2 * r) ** a, e / 2),
        "E2": (2 * b * P * (-3 * Mg * r**2).exp(), e / 4),
        "E3": (2 * (P - 1) * b * u + b * (t.exp() - 1), e / 4),
        "L8.1": (flint.arb(P), Pp),
        "L8.2": (flint.arb(dense), (8 * D * D + 34 * D) * Pp),
    }


def _random_point(rng, in_e3_region=True):
    while True:
        d = rng.randint(1, 5)
        alpha = Fraction(rng.randint(100, 1000), 1000)
        C = Fraction(rng.randint(1, 10000), 997)
        eps = Fraction(rng.randint(1, 1008), 1009)
        B = (eps / 16) * Fraction(rng.randint(1000, 10**6), 1000) if in_e3_region else \
            (eps / 16) * Fraction(rng.randint(1, 999), 1000)
        x = flint.arb(d).sqrt() / 2 * (4 * _arb(C) / _arb(eps)) ** (1 / _arb(alpha))
        if x > 1 and x < 10**40:  # P >= 2, and P small enough for 300 bits to round m
            return d, alpha, C, B, eps


def test_arb_200_random_points_agree_with_the_proved_regions():
    rng = random.Random(20)
    old = flint.ctx.prec
    flint.ctx.prec = PREC
    try:
        for _ in range(200):
            d, alpha, C, B, eps = _random_point(rng)
            _, _, sides = _sides(d, alpha, C, B, eps)
            for cid, (lhs, rhs) in sides.items():
                slack = rhs - lhs
                if cid == "E2" or (cid == "E1" and alpha == 1):  # equality everywhere / at alpha = 1
                    assert slack.contains(0) and slack.rad() < flint.arb(2) ** -200 * (1 + abs(rhs)), cid
                else:
                    assert slack > 0 or (cid == "E0" and slack.contains(0)), (cid, d, alpha, C, B, eps)
    finally:
        flint.ctx.prec = old


def test_arb_e3_outside_its_region_follows_the_criterion():
    """B < eps/16: E3 holds exactly when 0 <= t <= t* (the criterion of the table), point by point."""
    rng = random.Random(7)
    lo, hi = parametric.t_star_enclosure()
    old = flint.ctx.prec
    flint.ctx.prec = PREC
    held = failed = 0
    try:
        for _ in range(200):
            d, alpha, C, B, eps = _random_point(rng, in_e3_region=False)
            try:
                _, t, sides = _sides(d, alpha, C, B, eps)
            except ArithmeticError:
                continue
            lhs, rhs = sides["E3"]
            if not lhs.is_finite():  # 36 d M_g + 2 <= 0: M is not defined
                continue
            if t >= 0 and t < _arb(lo):
                assert rhs - lhs > 0
                held += 1
            elif t < 0 or t > _arb(hi):
                assert rhs - lhs < 0
                failed += 1
    finally:
        flint.ctx.prec = old
    assert held > 10 and failed > 10


def test_the_certified_bounds():
    old = flint.ctx.prec
    flint.ctx.prec = PREC
    try:
        rng = random.Random(3)
        for _ in range(200):
            t = _arb(Fraction(rng.randint(-5000, 5000), 1000))
            assert t.exp() >= 1 + t  # exp-below
            s = _arb(Fraction(rng.randint(0, 1500), 1000))
            assert s.exp() <= 1 + 3 * s  # exp-chord on [0, 3/2]
        assert _arb(Fraction(2)).exp() > 1 + 3 * _arb(Fraction(2))  # beyond t*, the chord bound fails
    finally:
        flint.ctx.prec = old
    lo, hi = parametric.t_star_enclosure()
    assert float(lo) < 1.903813694 < float(hi)  # mpmath's root of e^t = 1 + 3t, worked separately


# ------------------------------------------------------------------------------------------
# The construction's facts the proofs rely on, and the refutation re-checked by pou


@pytest.mark.parametrize("d,eps", [(1, "1/10"), (2, "1/2")])
def test_dense_count_of_the_built_network_is_the_formula(d, eps):
    K = constants(Instance(d=d, eps=eps, C_H=1, B=1, target="0"))
    dense, _ = build(K).count_parameters()
    D, P = d + 4, K.P
    assert dense == 8 * D * P + 8 * D * D + 26 * D  # the expanded 8D(P+2) + 4D + 2(4D^2 + 3D)


def test_pou_refutes_e3_at_the_reported_point(capsys, rows):
    a = rows["E3"].refuted_at
    code, out, _ = run_cli(capsys, "pou", "--d", str(a["d"]), "--alpha", a["alpha"], "--holder", a["holder"],
                           "--bound", a["bound"], "--eps", a["eps"], "--target", "x1/200", "--points", "0",
                           "--grid", "2", "--quiet", "--json")
    claims = {c["id"]: c["verdict"] for c in json.loads(out)["claims"]}
    assert code == 1 and claims["E3"] == "refuted"
    assert all(claims[k] == "proved" for k in ("E0", "E1", "E2", "L8.1", "L8.2"))


def test_a_tampered_constant_is_not_proved(monkeypatch):
    """r_g = (eps/(2 C_H))^(1/alpha) breaks E1 (C_H (2 r_g)^alpha = 2^alpha eps/2): the step fails, the verdict is open."""
    monkeypatch.setattr(parametric, "r_g_of", lambda eps, C_H, alpha: (eps / (2 * C_H)) ** (1 / alpha))
    r = parametric._e1()
    assert r.verdict == "open" and not r.steps[0][1]


def test_a_failed_step_leaves_the_sub_region_open_but_keeps_a_certified_refutation(monkeypatch):
    monkeypatch.setattr(parametric, "_zero", lambda e: False)
    r = parametric._e3()
    assert r.verdict == "refuted" and r.open_region == r.region and r.refuted_at["P"] == 40
    assert parametric._e2().verdict == "open"


def test_a_wrong_slack_is_not_signed():
    import sympy

    a, b = sympy.symbols("a b", positive=True)
    assert not parametric._nonneg(a - b)
    assert parametric._nonneg((a - b) ** 2)


def test_chain_command_text_and_json(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "chain")
    assert code == 1 and "E3     refuted" in out and "verdict: refuted" in out
    code, out, _ = run_cli(capsys, "chain", "--json", "--out", str(tmp_path / "c.json"))
    doc = json.loads((tmp_path / "c.json").read_text())
    assert code == 1 and doc["verdict"] == "refuted" and [c["id"] for c in doc["claims"]][3] == "E3"
    code, _, err = run_cli(capsys, "chain", "--out", str(tmp_path / "missing" / "c.txt"))
    assert code == 2 and "does not exist" in err
