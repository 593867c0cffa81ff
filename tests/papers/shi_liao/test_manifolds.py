"""[SL26] on manifolds (docs/shi_liao.md, "Manifolds"): exact embeddings, certified nets, L1-L8 on the manifold.

Independent computations used here: the squared distance to the cube's centre (rotation
invariant, so it checks the rational points without the package's residual), Q^T Q = I in SymPy,
coverage re-measured at 2000 random angles in mpmath, C_M's bound re-evaluated from its formula,
and tampered nets / curves that must be refuted.
"""

import math
import random
from fractions import Fraction

import mpmath
import pytest
import sympy
from sympy import Rational

from symbounds.core.claims import decide, escalate, exit_code
from symbounds.core.contexts import BallContext
from symbounds.papers import shi_liao as sl
from symbounds.papers.shi_liao.manifolds import manifold as mf

CASES = {
    "circle": ("circle", None),
    "circle-in-5": ("circle", 5),
    "sphere": ("sphere", None),
    "torus": ("torus", None),
    "curve-10": ("curve", 10),
}


def certify(mi, n_random=3):
    K = mi.constants()
    model = sl.build(K)
    pts = mi.sample_points(n_random, seed=2)
    res, last, prec = escalate(lambda ctx: sl.measure(ctx, K, model, pts), 128, 1024,
                               exact=lambda cid: sl.decide_exactly(K, model, cid))
    sym = [decide(BallContext(128), m) for m in sl.symbolic_claims(K)]
    return {r.id: r for r in sym + res}, K, pts


@pytest.fixture(scope="module")
def certified():
    return {key: certify(mf.manifold_instance(name, amb)) for key, (name, amb) in CASES.items()}


@pytest.mark.parametrize("key", list(CASES))
def test_every_claim_proved_on_the_manifold(certified, key):
    verdicts, K, _ = certified[key]
    expected = {"L1", "L2.1", "L2.2", "L2.3", "L2.4", "L3", "L4.1", "L4.2", "L4.3", "L5.1", "L5.2", "L5.3",
                "L6.1", "L6.2", "L7", "E1", "E2", "E3", "L8.1", "L8.2", "M0", "M1", "M2.0", "M2", "A1", "A2"}
    assert set(verdicts) == expected
    for cid, r in verdicts.items():
        assert r.verdict == ("evidence" if cid in ("A1", "A2") else "proved"), (key, cid, r)
    assert exit_code(list(verdicts.values())) == 0
    assert K.D == K.inst.d + 4 and K.d_int == mf.manifold_instance(*CASES[key]).man.d


@pytest.mark.parametrize("key", list(CASES))
def test_points_lie_on_the_manifold_exactly(certified, key):
    _, K, pts = certified[key]
    man = K.domain.man
    radii = [Fraction(int(r.p), int(r.q)) for r in map(Rational, man.radii)]
    want = sum(r * r for r in radii)  # |x - 1/2|^2 = sum rho_k^2 for every point, whatever Q is
    centres = [tuple(Fraction(int(v.p), int(v.q)) for v in c) for c in K.centres]
    for x in pts + centres:
        assert len(x) == man.ambient
        assert all(0 <= v <= 1 for v in x)
        assert sum((v - Fraction(1, 2)) ** 2 for v in x) == want
        assert man.residual(x) == 0
    off = list(pts[0])
    off[0] += Fraction(1, 10**6)
    assert man.residual(tuple(off)) > 0


def test_cayley_matrix_is_exactly_orthogonal():
    for n in (3, 5, 10):
        Q = sympy.Matrix(mf.cayley(n)).applyfunc(lambda f: Rational(f.numerator, f.denominator))
        assert Q.T * Q == sympy.eye(n)
        assert sum(1 for v in Q if v != 0) > 2 * n  # genuinely mixes coordinates


@pytest.mark.parametrize("key", ["circle", "sphere", "torus", "curve-10"])
def test_net_covers_at_random_points_measured_independently(certified, key):
    _, K, _ = certified[key]
    man = K.domain.man
    mp = mpmath.MPContext()
    mp.prec = 80
    cen = [[mp.mpf(v.numerator) / v.denominator for v in man.base_of(c)] for c in
           [tuple(Fraction(int(v.p), int(v.q)) for v in c) for c in K.centres]]
    r_g = mp.mpf(str(sympy.N(K.r_g, 30)))
    rng = random.Random(7)
    R = [mp.mpf(int(Rational(r).p)) / int(Rational(r).q) for r in man.radii]
    worst = 0
    for _ in range(2000):
        if man.name == "sphere":
            z = mp.mpf(rng.uniform(-1, 1))
            ph = mp.mpf(rng.uniform(0, 2 * math.pi))
            s = mp.sqrt(1 - z * z)
            y = [R[0] * s * mp.cos(ph), R[0] * s * mp.sin(ph), R[0] * z]
        elif man.name == "torus":
            a, b = (mp.mpf(rng.uniform(0, 2 * math.pi)) for _ in range(2))
            y = [R[0] * mp.cos(a), R[0] * mp.sin(a), R[1] * mp.cos(b), R[1] * mp.sin(b)]
        else:
            t = mp.mpf(rng.uniform(0, 2 * math.pi))
            y = [v for k, r in enumerate(R, 1) for v in (r * mp.cos(k * t), r * mp.sin(k * t))]
        y += [0] * (man.ambient - len(y))
        near = min(mp.sqrt(sum((a - b) ** 2 for a, b in zip(y, c))) for c in cen)
        worst = max(worst, near)
    assert worst <= r_g
    assert worst > r_g / 3  # the net is not wastefully fine


def test_a_net_with_a_hole_is_refuted():
    mi = mf.manifold_instance("circle")
    K = mi.constants()
    cells = list(K.domain.cells)
    cells[5] = (cells[6][0],) + cells[5][1:]  # cell 5 served by cell 6's centre
    dom = mf.ManifoldDomain(mi.man, cells)
    ctx = BallContext(128)
    K.domain = dom
    m1 = next(m for m in dom.measure_claims(ctx, K, mi.sample_points(1)) if m.id == "M1")
    assert decide(ctx, m1).verdict == "refuted"


def test_a_curve_with_a_large_chord_arc_ratio_is_refuted():
    # radii (1, 1, 1)/4: v = sqrt(14)/4 and chord(pi) = sqrt(8)/4, so v pi / chord(pi) = 4.15 > 2.
    man = mf.Manifold("curve", (Rational(1, 4),) * 3, 6)
    ctx = BallContext(128)
    with ctx.scope():
        m = {x.id: x for x in mf.ManifoldDomain(man, [])._chord_arc(ctx)}
    assert decide(ctx, m["M2"]).verdict == "refuted"
    # ... and the default curve's ratio, re-measured in mpmath at 20000 angles, stays below 2.
    man = mf.make_manifold("curve")
    R = [float(r) for r in man.radii]
    v = math.sqrt(sum((k * r) ** 2 for k, r in enumerate(R, 1)))
    ratio = max(v * dl / math.sqrt(sum(4 * r * r * math.sin(k * dl / 2) ** 2 for k, r in enumerate(R, 1)))
                for dl in (math.pi * i / 20000 for i in range(1, 20001)))
    assert 1.5 < ratio < 2


@pytest.mark.parametrize("key", list(CASES))
def test_size_bound_against_formula(certified, key):
    _, K, _ = certified[key]
    man, inst = K.domain.man, K.inst
    pi, s2 = math.pi, math.sqrt(2)
    R = [float(r) for r in man.radii]
    k = 1 - 1 / 64
    v = math.sqrt(sum((j * r) ** 2 for j, r in enumerate(R, 1))) if man.name in ("circle", "curve") else None
    if man.name in ("circle", "curve"):
        C_M = (pi + 1) * v / (2 * k)
    elif man.name == "sphere":
        C_M = (pi**2 + 3 * pi / s2 + 3) * R[0] ** 2 / (4 * k * k)
    else:
        C_M = (pi * s2 + 1) ** 2 * R[0] * R[1] / (4 * k * k)
    d, a = man.d, float(inst.alpha)
    bound = C_M * (16 * float(inst.C_H)) ** (d / a) * float(inst.eps) ** (-d / a)
    assert abs(float(K.P_paper) - bound) < 1e-9 * bound
    assert K.P <= bound
    # the net radius
    assert abs(float(K.r_g) - (float(inst.eps) / (8 * float(inst.C_H))) ** (1 / a)) < 1e-15


def test_holder_exponent_one_half():
    mi = mf.manifold_instance("circle", alpha="1/2", eps="3/4")
    L, B = 1.0, 0.5  # default circle: geodesic Lipschitz 1, B = 1/2; C_H = L^a (2B)^(1-a) rounded up
    assert float(mi.inst.C_H) >= L**0.5 * (2 * B) ** 0.5
    assert float(mi.inst.C_H) - L**0.5 * (2 * B) ** 0.5 < 1e-5
    # certify a cheaper alpha = 1/2 instance: g = (x1 - 1/2)/16 = cos(t)/32 on the circle of radius
    # 1/2, geodesic Lipschitz 1/16, |g| <= 1/32 <= B = 1/8: C_H = (1/16)^(1/2) (1/4)^(1/2) = 1/8.
    mi = mf.manifold_instance("circle", alpha="1/2", C_H="1/8", B="1/8", eps="1/2", target="(x1-1/2)/16")
    assert mi.r_g() == Rational(1, 4)
    verdicts, K, _ = certify(mi, 2)
    assert K.P == math.ceil(math.pi * 0.5 / (0.25 * 63 / 64))
    assert all(r.verdict in ("proved", "evidence") for r in verdicts.values()), \
        {c: r.verdict for c, r in verdicts.items()}


def test_wrong_holder_constant_is_refuted():
    mi = mf.manifold_instance("circle", C_H="1/2", eps="1/4")  # the target is 1-Lipschitz
    verdicts, _, _ = certify(mi, 1)
    assert verdicts["A2"].verdict == "refuted"


@pytest.mark.parametrize("kwargs, match", [
    (dict(name="circle", radius="3/4"), "does not fit"),
    (dict(name="torus", ambient=6, radius="1/2"), "does not fit"),
    (dict(name="sphere", ambient=2), "below"),
    (dict(name="curve", ambient=5), "below"),
    (dict(name="circle", d=2), "intrinsic dimension 1"),
    (dict(name="klein"), "unknown manifold"),
    (dict(name="circle", radius="-1/4"), "positive"),
    (dict(name="circle", alpha="3/2"), "alpha"),
    (dict(name="circle", eps="1/1000"), "limit"),
    (dict(name="circle", target="x1+", C_H=1), "end of input"),
])
def test_bad_parameters_rejected_in_one_line(kwargs, match):
    name = kwargs.pop("name")
    with pytest.raises(ValueError, match=match) as e:
        mi = mf.manifold_instance(name, **kwargs)
        mi.constants()
    assert "\n" not in str(e.value)


def test_user_target_needs_a_holder_constant():
    with pytest.raises(ValueError, match="holder"):
        mf.manifold_instance("circle", target="x1")
    mi = mf.manifold_instance("circle", target="x1/4", C_H=1)
    assert mi.constants().P >= 2


def test_pou_run_on_a_manifold():
    from symbounds.app.report import pou_json as as_json
    from symbounds.app.report import pou_text as render_text
    from symbounds.papers.shi_liao.run import PouOptions, run

    res = run(mf.manifold_instance("torus"), PouOptions(points=2))
    assert res.exit_code == 0
    js = as_json(res)
    assert js["instance"]["manifold"] == "torus" and js["constants"]["manifold"] == "torus"
    assert js["constants"]["reach"] == "1/4"
    assert "manifold=torus" in render_text(res)
    assert js["whole_manifold"]["status"] == "proved"
    assert next(c for c in js["claims"] if c["id"] == "L7.M")["verdict"] == "proved"


def test_user_points_must_lie_on_the_manifold():
    mi = mf.manifold_instance("circle")
    on = (Fraction(1, 2) + Fraction(3, 10), Fraction(1, 2) + Fraction(4, 10))  # rho (3/5, 4/5), rho = 1/2
    assert mi.check_point(on) == on
    with pytest.raises(ValueError, match="does not lie"):
        mi.check_point((Fraction(1, 2), Fraction(1, 2)))
    with pytest.raises(ValueError, match="2 coordinates"):
        mi.check_point((Fraction(1, 2),))


def test_reach():
    assert mf.make_manifold("circle").reach() == Rational(1, 2)
    assert mf.make_manifold("torus", 6).reach() == Rational(1, 4)
    # the sampled estimate reproduces the reach of a circle (a curve with one harmonic)
    assert abs(mf.Manifold("curve", (Rational(1, 2),), 2).reach_estimate() - 0.5) < 1e-4  # float64 cancellation near t = 0
    est = mf.make_manifold("curve").reach_estimate()
    assert 0 < est < 6 / 13  # below the first harmonic's radius


# ------------------------------------------------------------------------------------------
# L7 over the whole manifold (Taylor-model boxes around parameter rectangles)


@pytest.mark.parametrize("name, ambient", [("circle", None), ("curve", 10)])
def test_whole_manifold_certificate(name, ambient):
    from symbounds.papers.shi_liao.manifolds.certify import certify_on_manifold

    mi = mf.manifold_instance(name, ambient)
    K = mi.constants()
    claim, info = certify_on_manifold(K, sl.build(K))
    assert decide(BallContext(128), claim).verdict == "proved" and info["status"] == "proved"
    assert Fraction(info["max_bound"]) <= Fraction(int(K.inst.eps.p), int(K.inst.eps.q))


def test_whole_manifold_tighter_eps_proved_and_too_tight_refuted():
    from dataclasses import replace

    from symbounds.core.contexts import MPContext
    from symbounds.core.expr import variables
    from symbounds.core.transformer import forward
    from symbounds.papers.shi_liao.manifolds.certify import certify_on_manifold

    mi = mf.manifold_instance("circle")
    K = mi.constants()
    model = sl.build(K)
    # the same network certified against eps = 1/30 (its true sup error is about 0.025)
    claim, info = certify_on_manifold(replace(K, inst=replace(K.inst, eps=Rational(1, 30))), model)
    assert decide(BallContext(128), claim).verdict == "proved"
    # ... and against eps = 1/50: a counterexample on the circle, re-evaluated in mpmath
    claim, info = certify_on_manifold(replace(K, inst=replace(K.inst, eps=Rational(1, 50))), model)
    assert decide(BallContext(128), claim).verdict == "refuted" and info["status"] == "refuted"
    q = Fraction(info["counterexample_angles_over_pi"][0])
    ctx = MPContext(128)
    with ctx.scope():
        # (MPContext.convert rejects the mpf of its own private context: pass a rational point
        # within 1e-30 of the counterexample instead; the margin is about 1e-3)
        xm = mi.man.x_at(ctx, mi.man.y_at(ctx, (q,)))
        x = tuple(Fraction(mpmath.nstr(v, 35, min_fixed=-1, max_fixed=1)) for v in xm)
        err = abs(forward(ctx, model, x) - ctx.from_sympy(K.g, env=dict(zip(variables(2), map(ctx.convert, x)))))
    assert err > ctx.convert(Fraction(1, 50) + Fraction(1, 10**4))


@pytest.mark.slow
def test_whole_sphere_certificate():
    from symbounds.papers.shi_liao.manifolds.certify import certify_on_manifold

    mi = mf.manifold_instance("sphere")
    K = mi.constants()
    claim, _ = certify_on_manifold(K, sl.build(K))
    assert decide(BallContext(128), claim).verdict == "proved"
