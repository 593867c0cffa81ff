"""The kernel's centred weighted values and their convex hull (symbounds_kernel/hull.py).

References the kernel does not share: the 300-bit mpmath forward pass of ``tests/byon_helpers.py``
(straight from the model-file formulas), the exact optimum of the hull's linear programme (fill the
largest values up to their caps, in Fractions), softmax weights at sampled points in mpmath, and
the targets written out by hand in mpmath.  The certificates are written here by ``certify`` with
its default (tight) box pass.
"""

import copy
import hashlib
import json
import pathlib
import random
import sys
from fractions import Fraction

import mpmath
import pytest
from flint import arb, ctx

import symbounds_kernel
from symbounds_kernel import hull, taylor, verify
from symbounds_kernel.network import Network

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from byon_helpers import as_fraction, reference  # noqa: E402


class _prec:
    def __enter__(self):
        self.old, ctx.prec = ctx.prec, verify.PREC

    def __exit__(self, *exc):
        ctx.prec = self.old


def _q(v: arb) -> Fraction:
    return verify._upper(v)


def _ball(q: Fraction) -> arb:
    return arb(q.numerator) / q.denominator


# ------------------------------------------------------------------------------------------
# the hull and the caps


def _lp_max(u, v):
    """max sum pi_k v_k over 0 <= pi_k <= u_k, sum pi_k = 1 (sum u >= 1): the largest values
    filled up to their caps, exactly."""
    left, total = Fraction(1), Fraction(0)
    for k in sorted(range(len(v)), key=lambda k: -v[k]):
        take = min(u[k], left)
        total, left = total + take * v[k], left - take
    assert left == 0
    return total


@pytest.mark.parametrize("seed", range(30))
def test_hull_bounds_are_the_linear_programme_optimum(seed):
    rng = random.Random(seed)
    n = rng.randint(1, 9)
    u = [Fraction(rng.randint(1, 64), 64) for _ in range(n)]
    u[rng.randrange(n)] = Fraction(1) if sum(u) < 1 else u[0]
    lo = [Fraction(rng.randint(-400, 400), 97) for _ in range(n)]
    hi = [a + Fraction(rng.randint(0, 300), 89) for a in lo]
    with _prec():
        L, H = hull.bounds([_ball(x) for x in u], [_ball(x) for x in lo], [_ball(x) for x in hi])
        H, L = _q(H), -_q(-L)
    top, bottom = _lp_max(u, hi), -_lp_max(u, [-a for a in lo])
    assert top <= H <= top + Fraction(1, 2**100)
    assert bottom - Fraction(1, 2**100) <= L <= bottom


@pytest.mark.parametrize("seed", range(20))
def test_caps_bound_the_softmax_weights_at_points_of_the_box(seed):
    """Affine shifted scores ``a_k = c_k + g_k . delta`` over ``|delta_i| <= h_i``: at sampled
    points (corners included) every weight is at most its cap."""
    rng = random.Random(seed)
    n, d = rng.randint(1, 7), rng.randint(1, 2)
    c = [Fraction(rng.randint(-60, 10), 8) for _ in range(n)]
    g = [[Fraction(rng.randint(-40, 40), 8) for _ in range(d)] for _ in range(n)]
    h = [Fraction(1, 2 ** rng.randint(0, 6)) for _ in range(d)]
    with _prec():
        u = [_q(x) for x in hull.caps([taylor.TM(_ball(ck), [_ball(x) for x in gk], arb(0)) for ck, gk in zip(c, g)],
                                      [_ball(x) for x in h])]
    assert all(0 < x <= 1 for x in u)
    points = [[s * hi for s, hi in zip(signs, h)] for signs in ([1, 1], [1, -1], [-1, 1], [-1, -1], [0, 0])]
    points += [[Fraction(rng.randint(-8, 8), 8) * hi for hi in h] for _ in range(6)]
    with mpmath.workprec(300):
        for delta in points:
            a = [ck + sum(gi * x for gi, x in zip(gk, delta)) for ck, gk in zip(c, g)]
            e = [mpmath.exp(mpmath.mpf(x.numerator) / x.denominator) for x in a]
            for ek, uk in zip(e, u):
                assert as_fraction(ek / mpmath.fsum(e)) <= uk


def test_meet_keeps_the_narrower_enclosure():
    """Two tokens, weights at most 1 and 3/4, values in [0, 1] and [2, 3]: the hull is
    [0, 1/4 * 1 + 3/4 * 3] = [0, 5/2] (all weight on token 0; as much as allowed on token 1); a
    model 4 wide gives way to it, a model 1 wide does not."""
    with _prec():
        u, h = [arb(1), arb(3) / 4], [arb(1)]
        vals = [taylor.TM(arb(1) / 2, [arb(0)], arb(1) / 2), taylor.TM(arb(5) / 2, [arb(0)], arb(1) / 2)]
        wide = taylor.TM(arb(2), [arb(1)], arb(1))  # [0, 4] over h = 1
        met = hull.meet(wide, u, vals, h)
        assert met is not wide and all(g.is_zero() for g in met.g)
        enc, tol = taylor.enclosure(met, h), Fraction(1, 2**20)
        assert -tol <= -_q(-enc) <= 0 and Fraction(5, 2) <= _q(enc) <= Fraction(5, 2) + tol
        narrow = taylor.TM(arb(2), [arb(0)], arb(1) / 2)
        assert hull.meet(narrow, u, vals, h) is narrow


# ------------------------------------------------------------------------------------------
# random small networks against the 300-bit forward pass


def _random_model(rng, d):
    """``d`` inputs, ``n`` tokens, two softmax layers whose scores read ``x`` (the last one with
    a large scale, two heads) around a feed-forward layer, random small dyadic weights."""
    D, n = d + 2, rng.randint(2, 5)
    w = lambda k=4: str(Fraction(rng.randint(-k, k), 8))
    mat = lambda r, c, k=8: [[w(k) for _ in range(c)] for _ in range(r)]

    def head(dk, scale):
        return {"W_Q": mat(dk, D, scale), "W_K": mat(dk, D), "W_V": mat(2, D), "W_O": mat(D, 2)}

    H = rng.randint(4, 32)
    layers = [{"type": "attention", "kind": "softmax", "skip": "1", "heads": [head(1, 4)]},
              {"type": "ffn", "skip": "1", "W1": mat(3, D), "b1": [w() for _ in range(3)], "W2": mat(D, 3),
               "b2": [w() for _ in range(D)]},
              {"type": "attention", "kind": "softmax", "skip": rng.choice(["0", "1"]), "tau": "1/4",
               "heads": [head(2, H), head(1, H)]}]
    if rng.random() < 0.5:
        layers.append({"type": "ffn", "skip": "1", "W1": mat(2, D), "b1": [w(), w()], "W2": mat(D, 2),
                       "b2": [w() for _ in range(D)]})
    return {"format": "symbounds-transformer/1", "input": "vector", "precision_bits": 64,
            "embedding": {"base": mat(D, n), "E": mat(D, d), "column": rng.randrange(n)}, "layers": layers,
            "readout": {"row": rng.randrange(D), "column": rng.randrange(n)}}


def test_random_networks_are_enclosed_with_and_without_the_hull(monkeypatch):
    """The kernel's enclosure over random boxes (width 2^-1 to 2^-16) holds the 300-bit
    values at the corners, the centre and random points; the hull is taken on some boxes and the
    model kept on others (so both branches are what is tested)."""
    taken = []
    meet = hull.meet

    def counted(t, u, vals, h):
        out = meet(t, u, vals, h)
        taken.append(out is not t)
        return out

    monkeypatch.setattr(hull, "meet", counted)
    rng = random.Random(20261203)
    for case in range(60):
        d = 1 + case % 2
        model = _random_model(rng, d)
        width = Fraction(1, 2 ** rng.randint(1, 16))
        lo = [Fraction(rng.randint(0, 1024), 1024) * (1 - width) for _ in range(d)]
        hi = [a + width for a in lo]
        with _prec():
            try:
                T = Network(model, d).enclose(lo, hi)
            except ArithmeticError:
                continue
        if not T.is_finite():
            continue
        corners = [[lo[i] if (m >> i) & 1 else hi[i] for i in range(d)] for m in range(2 ** d)]
        points = corners + [[(a + b) / 2 for a, b in zip(lo, hi)]]
        points += [[a + (b - a) * Fraction(rng.randint(0, 64), 64) for a, b in zip(lo, hi)] for _ in range(3)]
        for x in points:
            v = as_fraction(reference(model, x)[0])
            assert -_q(-T) <= v <= _q(T), (case, x)
    assert sum(taken) >= 10 and len(taken) - sum(taken) >= 10, (sum(taken), len(taken))


# ------------------------------------------------------------------------------------------
# certificates of certify's tight pass


TARGETS = {"sin(2*x1)": lambda x: mpmath.sin(2 * x[0]), "sin(x1+x2)/2": lambda x: mpmath.sin(x[0] + x[1]) / 2}


@pytest.fixture(scope="module")
def tight_certs():
    """The default instance (d = 1, P = 40) and d = 2, eps = 1/2 (P = 36), by ``certify`` as it
    runs by default (tight: ``CertifyOptions()``); the kernel before the hull rejected both."""
    from symbounds.core.boxes import CertifyOptions
    from symbounds.papers import shi_liao as sl
    from symbounds.papers.shi_liao.certificate import certify_instance

    assert CertifyOptions().tight
    insts = [sl.Instance(), sl.Instance(d=2, C_H=1, B=1, eps="1/2", target="sin(x1+x2)/2")]
    return [certify_instance(inst, CertifyOptions())[0] for inst in insts]


def _kernel(cert, tmp_path, name="c.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cert))
    return symbounds_kernel.check_file(str(p))


def test_the_kernel_accepts_tight_certificates(tight_certs, tmp_path):
    for i, cert in enumerate(tight_certs):
        ok, reason = _kernel(cert, tmp_path, f"t{i}.json")
        assert cert["verdict"] == "proved" and ok, reason
        assert reason.startswith(f"{len(cert['boxes'])} boxes cover [0,1]^{cert['d']}")
    assert len(tight_certs[0]["boxes"]) < 64 and len(tight_certs[1]["boxes"]) < 100  # fewer than the plain pass's


def _ratios(cert):
    """The kernel's single enclosure of |T - g| over each box over the box's recorded bound."""
    from symbounds_kernel.target import evaluate, parse

    d = cert["d"]
    with _prec():
        net, tree = Network(cert["model"], d), parse(cert["target"], d)
        out = []
        for b in cert["boxes"]:
            lo, hi = [Fraction(v) for v in b["lo"]], [Fraction(v) for v in b["hi"]]
            err = abs(net.enclose(lo, hi) - evaluate(tree, [verify._interval(a, c) for a, c in zip(lo, hi)]))
            out.append(_q(err) / Fraction(b["bound"]) if err.is_finite() else Fraction(10**9))
    return out


def test_the_hull_brings_one_enclosure_to_the_recorded_bound(tight_certs, monkeypatch):
    """With the hull the kernel's single enclosure of every box is the prover's bound to 10^-6
    (a box a hair above it is proved on its halves); without it, far above on every box (the
    certificate is then accepted only through bisections, more than 6 of them on wide boxes)."""
    for cert in tight_certs:
        assert max(_ratios(cert)) <= 1 + Fraction(1, 10**6)
    monkeypatch.setattr(hull, "meet", lambda t, u, vals, h: t)
    for cert in tight_certs:
        assert min(_ratios(cert)) > 2


def _redigest(c):
    text = json.dumps(c["model"], sort_keys=True, separators=(",", ":")).encode()
    c["model_sha256"] = hashlib.sha256(text).hexdigest()
    return c


def _error_at(cert, x):
    """|T(x) - g(x)| at 300 bits (network and target both from their formulas), as a Fraction."""
    with mpmath.workprec(300):
        T = reference(cert["model"], x)[0]
        g = TARGETS[cert["target"]]([mpmath.mpf(v.numerator) / v.denominator for v in x])
        return as_fraction(abs(T - g))


def _centre(box):
    return [(Fraction(a) + Fraction(b)) / 2 for a, b in zip(box["lo"], box["hi"])]


def test_a_bound_lowered_below_the_true_sup_is_rejected(tight_certs, tmp_path):
    cert = copy.deepcopy(tight_certs[1])
    i = max(range(len(cert["boxes"])), key=lambda i: Fraction(cert["boxes"][i]["bound"]))
    box = cert["boxes"][i]
    new = _error_at(cert, _centre(box)) * Fraction(99, 100)  # below |T - g| at a point: below the sup
    assert 0 < new < Fraction(box["bound"])
    box["bound"] = str(new)
    cert["max_bound"] = str(max(Fraction(b["bound"]) for b in cert["boxes"]))
    ok, reason = _kernel(cert, tmp_path)
    assert not ok and reason.startswith(f"box {i}: the kernel cannot bound"), reason


def test_a_weight_changed_with_its_digest_is_rejected(tight_certs, tmp_path):
    """The last feed-forward bias of the readout row raised by eps: the network moves by eps,
    and at box 0's centre |T - g| exceeds that box's bound (300 bits)."""
    cert = copy.deepcopy(tight_certs[1])
    layer = cert["model"]["layers"][-1]
    row = cert["model"]["readout"]["row"]
    assert layer["type"] == "ffn"
    layer["b2"][row] = str(Fraction(layer["b2"][row]) + Fraction(cert["eps"]))
    _redigest(cert)
    x = _centre(cert["boxes"][0])
    assert _error_at(cert, x) > Fraction(cert["boxes"][0]["bound"])
    ok, reason = _kernel(cert, tmp_path)
    assert not ok and "the kernel cannot bound |T - g| by its recorded bound" in reason, reason
    ok, reason = _kernel(copy.deepcopy(tight_certs[1]) | {"model": cert["model"]}, tmp_path, "nodigest.json")
    assert not ok and reason == "the model does not match model_sha256"


def test_a_box_removed_is_rejected(tight_certs, tmp_path):
    for cert in tight_certs:
        cert = copy.deepcopy(cert)
        i = min(range(len(cert["boxes"])), key=lambda i: Fraction(cert["boxes"][i]["bound"]))
        del cert["boxes"][i]
        ok, reason = _kernel(cert, tmp_path)
        assert not ok and reason == f"the boxes do not cover [0,1]^{cert['d']}", reason
