"""The bound for every target of the Hölder class (``certify --holder-class``), checked independently.

* ``E(x)`` at 1,000 random points against a 300-bit mpmath evaluation of the exported model file
  (its layer-1 attention, FFN 1 and layer-2 softmax written out here from the JSON, with no
  symbounds evaluator);
* the theorem itself on three targets of the class: at many points the network's own certified
  error is at most ``E(x)``, and at most the class certificate's bound;
* the worst target ``g_0``, certified with ``certify --target``: its error at ``x*`` lies within the
  leakage of ``E(x*)``;
* a much smaller ``M_g`` is refuted with a counterexample point; tampered certificates are rejected.
"""

import copy
import json
import random
from fractions import Fraction

import flint
import mpmath
import pytest
from cli_helpers import run_cli

from symbounds.core.boxes import point_error
from symbounds.core.expr import parse_target
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.papers.shi_liao.class_bound import ClassOptions, box_upper, class_network, point_values, worst_target
from symbounds.papers.shi_liao.class_certificate import certify_class, check_class_certificate, class_model
from symbounds.papers.shi_liao.constants import Instance, constants
from symbounds.papers.shi_liao.construction import build

DEFAULT = Instance()


@pytest.fixture(scope="module")
def certified():
    cert, res = certify_class(DEFAULT, ClassOptions(prec=128))
    return cert, res


@pytest.fixture(scope="module")
def network():
    mj, model, K = class_model(DEFAULT)
    return mj, class_network(model, 1, K.centres, 1, 2, 2, 256), K


# --- an independent evaluation of the model file -----------------------------------------------


def _mp(text):
    if "/" in text:
        p, q = text.split("/")
        return mpmath.mpf(int(p)) / int(q)
    return mpmath.mpf(text)


def _sparse(rows):
    """The nonzero entries ``(row, column, value)`` of a matrix of the JSON."""
    return [(r, c, _mp(v)) for r, row in enumerate(rows) for c, v in enumerate(row) if v != "0"]


def _mat(rows):
    return mpmath.matrix([[_mp(v) for v in r] for r in rows])


class MpModel:
    """The exported JSON at 300 bits: layer 1 (every head), FFN 1 with both ReLUs, layer 2's softmax
    at column 1, and ``l_k`` from the layer-1 weights on token 1 and FFN 1's scale of row 2."""

    def __init__(self, mj, d, C_H, B):
        mpmath.mp.prec = 300
        self.d, self.C_H, self.B = d, mpmath.mpf(C_H), mpmath.mpf(B)
        emb = mj["embedding"]
        self.base = _mat(emb["base"])
        self.E = _mat(emb["E"])
        D, P = self.base.rows, self.base.cols
        self.D, self.P = D, P
        l1, f1, l2 = mj["layers"][0], mj["layers"][1], mj["layers"][2]
        assert l1["skip"] == "0" and f1["skip"] == "0" and l2["skip"] == "0"
        # layer-1 queries and keys read only rows that x does not enter (rows >= d): the attention
        # matrices are those of the base embedding
        self.heads = []
        for h in l1["heads"]:
            WQ, WK, WV, WO = (_mat(h[k]) for k in ("W_Q", "W_K", "W_V", "W_O"))
            assert all(WQ[a, i] == 0 and WK[a, i] == 0 for a in range(WQ.rows) for i in range(d))
            Q, K = WQ * self.base, WK * self.base
            pi = mpmath.matrix(P, P)
            for j in range(P):
                s = [sum(Q[a, j] * K[a, k] for a in range(Q.rows)) for k in range(P)]
                m = max(s)
                e = [mpmath.exp(v - m) for v in s]
                t = sum(e)
                for k in range(P):
                    pi[j, k] = e[k] / t
            self.heads.append((pi, WV, WO))
        self.W1 = _sparse(f1["W1"])
        self.b1 = [_mp(v) for v in f1["b1"]]
        self.W2 = _sparse(f1["W2"])
        self.b2 = [_mp(v) for v in f1["b2"]]
        h2 = l2["heads"][0]
        self.Q2, self.K2 = _sparse(h2["W_Q"]), _sparse(h2["W_K"])
        lam = dict(((r, c), w) for r, c, w in self.W2)[(1, 1)]
        self.ell = []
        for k in range(P):
            own = abs(lam * self.heads[k][0][k, 0] - 1)
            self.ell.append(own + sum(lam * self.heads[h][0][k, 0] for h in range(P) if h != k))
        # layer 1 at the base embedding, and its change per unit of x_i: x enters column 1 only, and
        # the attention matrices do not depend on x, so column j changes by
        # sum_h W_O W_V E[:, i] pi^(h)[j, 1] per unit of x_i
        self.Z1_base = mpmath.matrix(D, P)
        for pi, WV, WO in self.heads:
            self.Z1_base += WO * (WV * self.base) * pi.T
        self.G = []
        for i in range(d):
            Gi = mpmath.matrix(D, P)
            for pi, WV, WO in self.heads:
                u = WO * (WV * self.E[:, i])
                for r in range(D):
                    if u[r] != 0:
                        for j in range(P):
                            Gi[r, j] += u[r] * pi[j, 0]
            self.G.append(Gi)

    def beta(self, x):
        """Layer 2's weights at column 1 for the input x."""
        D, P = self.D, self.P
        xs = [_mp(str(v)) for v in x]
        Z1 = [[self.Z1_base[r, j] + sum(xs[i] * self.G[i][r, j] for i in range(self.d)) for j in range(P)]
              for r in range(D)]
        H = [[mpmath.mpf(0)] * P for _ in range(2 * D)]
        for r, c, w in self.W1:
            for j in range(P):
                H[r][j] += w * Z1[c][j]
        H = [[max(v + self.b1[r], 0) for v in row] for r, row in enumerate(H)]
        Z2 = [[self.b2[r]] * P for r in range(D)]
        for r, c, w in self.W2:
            Z2[r] = [a + w * b for a, b in zip(Z2[r], H[c])]
        q = [sum(w * Z2[c][0] for rr, c, w in self.Q2 if rr == a) for a in range(1)]
        s = [sum(q[a] * w * Z2[c][k] for a, c, w in self.K2) for k in range(P)]
        m = max(s)
        e = [mpmath.exp(v - m) for v in s]
        t = sum(e)
        return [v / t for v in e]

    def E_at(self, x, centres):
        b = self.beta(x)
        out = mpmath.mpf(0)
        for k, c in enumerate(centres):
            dist = mpmath.sqrt(sum((_mp(str(xi)) - _mp(str(ci))) ** 2 for xi, ci in zip(x, c)))
            out += b[k] * (min(self.C_H * dist, 2 * self.B) + self.B * self.ell[k])
        return out


@pytest.mark.parametrize("n", [1000])
def test_E_matches_300_bit_evaluation_of_the_model_file(network, n):
    mj, net, K = network
    mp = MpModel(json.loads(json.dumps(mj)), 1, 2, 2)
    rng = random.Random(20)
    centres = [tuple(Fraction(str(v)) for v in c) for c in K.centres]
    worst = 0
    for _ in range(n):
        x = (Fraction(rng.randrange(0, 2**30 + 1), 2**30),)
        E, _ = point_values(net, x)
        ref = mp.E_at(x, centres)
        mid = mpmath.mpf(E.mid().str(60, radius=False))
        rad = mpmath.mpf(E.rad().str(10, radius=False))
        assert abs(ref - mid) <= rad + mpmath.mpf(2) ** -180, (x, E, ref)
        worst = max(worst, ref)
    assert 0.02 < worst < 0.0251


# --- the theorem on three targets of the class ---------------------------------------------------

TARGETS = ["sin(2*x1)", "min(2*x1, 1) - 1/2", "2*abs(x1 - 1/3) - 1"]


@pytest.mark.parametrize("target", TARGETS)
def test_class_bound_is_above_the_certified_error_of_targets(certified, network, target):
    cert, res = certified
    _, net, _ = network
    inst = Instance(target=target)
    model = model_from_json(model_to_json(build(constants(inst)), 192))
    g = parse_target(target, 1)
    rng = random.Random(hash(target) % 1000)
    pts = [(Fraction(i, 400),) for i in range(401)] + [(Fraction(rng.randrange(2**20), 2**20),) for _ in range(100)]
    top = 0
    for x in pts:
        err = point_error(model, g, 1, x, 128)  # the network's own certified error at x
        E, _ = point_values(net, x)
        assert not (err > E), (target, x, err, E)  # |T_g - g| <= E(x), the theorem
        top = max(top, float(err.upper().mid()))
    assert top <= float(res.max_bound)
    # the class bound is an honest bound, not a trivial one: each target's error is a fair share of it
    assert top > float(res.max_bound) / 50


def test_models_of_the_class_differ_only_in_the_values():
    """The certificate's network (values 0) and a target's network differ exactly in the entries
    g(c_h) of the layer-1 value rows: every other weight is the same."""
    skel = model_to_json(build(constants(Instance(target="0"))), 192)
    real = model_to_json(build(constants(Instance(target="sin(2*x1)"))), 192)
    diff = []
    for i, (a, b) in enumerate(zip(skel["layers"], real["layers"])):
        for h, (ha, hb) in enumerate(zip(a.get("heads", []), b.get("heads", []))):
            for key in ha:
                for r, (ra, rb) in enumerate(zip(ha[key], hb[key])):
                    diff += [(i, h, key, r, c) for c, (u, v) in enumerate(zip(ra, rb)) if u != v]
        for key in ("W1", "b1", "W2", "b2"):
            assert a.get(key) == b.get(key)
    assert skel["embedding"] == real["embedding"]
    # head h's value row 2 reads the constant row (row d + 1 = 1 in code, d = 1) with weight g(c_h)
    assert diff and all(i == 0 and key == "W_V" and r == 1 and c == 1 for i, h, key, r, c in diff)
    assert len({h for _, h, _, _, _ in diff}) == 40


def test_leakage_factors_bound_the_networks_own_values(network):
    """|g~_k - g(c_k)| <= B l_k, read off the network of a real target (its state after FFN 1)."""
    from symbounds.core.contexts import BallContext
    from symbounds.core.transformer import forward

    _, net, K = network
    inst = Instance(target="sin(2*x1)")
    Kg = constants(inst)
    model = model_from_json(model_to_json(build(Kg), 192))
    ball = BallContext(256)
    with ball.scope():
        Z = forward(ball, model, [Fraction(1, 3)], stop=2)
        for k in range(Kg.P):
            gc = ball.from_sympy(Kg.g_centres[k])
            assert abs(Z[1][k] - gc) <= 2 * net.ell[k]  # B = 2
        assert max(abs(Z[1][k] - ball.from_sympy(Kg.g_centres[k])).upper() for k in range(Kg.P)) > 0


# --- the certificate ---------------------------------------------------------------------------------


def test_default_class_certificate_is_proved_and_checks(certified):
    cert, res = certified
    assert res.verdict == "proved"
    assert Fraction(cert["max_bound"]) <= Fraction(1, 10)
    info = check_class_certificate(cert)
    assert info["boxes"] == len(cert["boxes"])
    import symbounds_kernel  # the independent checker accepts it too

    assert symbounds_kernel.check(copy.deepcopy(cert)).startswith(f"{len(cert['boxes'])} boxes cover [0,1]^1")
    # the two sides: sup E is about C_H / (2m) = 1/40 at the default instance
    lo, hi = Fraction(cert["worst"]["lower"]), Fraction(cert["max_bound"])
    assert lo <= hi <= lo * Fraction(1001, 1000) + Fraction(1, 10**9)
    assert Fraction(249, 10000) < lo < Fraction(1, 40)


def test_worst_target_certified_error_within_leakage(certified, capsys):
    """The worst target g0, as certify --target reads it: proved, and its error at x* is E(x*)
    up to the leakage 2B sum beta~ l (both sides)."""
    cert, res = certified
    g0 = cert["worst"]["target"]
    code, out, _ = run_cli(capsys, "certify", "--target", g0, "--quiet")
    assert code == 0, out
    model = model_from_json(model_to_json(build(constants(Instance(target=g0))), 192))
    x = tuple(Fraction(v) for v in cert["worst"]["x"])
    err = point_error(model, parse_target(g0, 1), 1, x, 256)
    E = res.worst_E
    leak = res.worst_leak
    assert err <= E
    assert err >= E - leak
    lower = Fraction(cert["worst"]["lower"])
    assert err >= flint.arb(flint.fmpq(lower.numerator, lower.denominator))
    assert worst_target(x, 1, 2, 2) == g0


def test_small_partition_scale_is_refuted_with_a_counterexample(capsys):
    """M_g = 100 (the derived one is about 18697): the class certificate is refuted, and the worst
    target at the reported point is refuted by certify --target at that point."""
    code, out, _ = run_cli(capsys, "certify", "--holder-class", "--Mg", "100", "--quiet", "--json")
    assert code == 1
    rep = json.loads(out)
    assert rep["verdict"] == "refuted"
    g0, x = rep["worst"]["target"], tuple(Fraction(v) for v in rep["worst"]["x"])
    inst = Instance(target=g0, M_g=100)
    model = model_from_json(model_to_json(build(constants(inst)), 192))
    err = point_error(model, parse_target(g0, 1), 1, x, 256)
    assert err > flint.arb(1) / 10
    code, out, _ = run_cli(capsys, "certify", "--target", g0, "--Mg", "100", "--quiet")
    assert code == 1 and "counterexample" in out


def _rejected(cert, why):
    with pytest.raises(Exception) as e:
        check_class_certificate(cert)
    assert why in str(e.value), str(e.value)


def test_tampered_class_certificates_are_rejected(certified):
    cert, _ = certified
    c = copy.deepcopy(cert)
    i = max(range(len(c["boxes"])), key=lambda j: Fraction(c["boxes"][j]["bound"]))
    c["boxes"][i]["bound"] = "1/1000"
    c["max_bound"] = str(max(Fraction(b["bound"]) for b in c["boxes"]))
    _rejected(c, "recomputed bound")
    c = copy.deepcopy(cert)
    del c["boxes"][3]
    _rejected(c, "do not cover")
    c = copy.deepcopy(cert)
    c["class"]["holder"] = "1"  # a smaller class than the network was built for
    _rejected(c, "not the construction")
    c = copy.deepcopy(cert)
    c["worst"]["lower"] = "1/30"
    _rejected(c, "worst.lower")
    c = copy.deepcopy(cert)
    c["worst"]["target"] = "sin(2*x1)"
    _rejected(c, "worst.target")
    c = copy.deepcopy(cert)
    c["instance"]["eps"] = "1/50"  # below the bounds: also a different network
    _rejected(c, "> eps")
    c = copy.deepcopy(cert)
    c["verdict"] = "refuted"
    _rejected(c, "not 'proved'")
    c = copy.deepcopy(cert)
    c["extra"] = "1"
    _rejected(c, "unknown field")


def test_check_command_accepts_and_rejects(certified, tmp_path, capsys, monkeypatch):
    cert, _ = certified
    p = tmp_path / "class.json"
    p.write_text(json.dumps(cert))
    code, out, _ = run_cli(capsys, "check", str(p), "--quiet")
    assert code == 0 and "class certificate valid" in out
    assert f"independent kernel: accepted: {len(cert['boxes'])} boxes cover [0,1]^1; for every g of the class" in out
    bad = copy.deepcopy(cert)
    bad["boxes"][0]["bound"] = "0"
    bad["max_bound"] = str(max(Fraction(b["bound"]) for b in bad["boxes"]))
    p.write_text(json.dumps(bad))
    code, out, err = run_cli(capsys, "check", str(p), "--quiet")
    assert code == 1 and "rejected" in err and len(err.strip().splitlines()) == 1
    assert "independent kernel: rejected: box 0: the kernel cannot bound E" in out
    # the kernel alone rejecting is enough: the full check passes a bound the kernel refuses
    import symbounds_kernel

    def refuse(cert, progress=None, **_):
        raise symbounds_kernel.Rejected("no")

    p.write_text(json.dumps(cert))
    monkeypatch.setattr(symbounds_kernel, "check", refuse)
    code, out, err = run_cli(capsys, "check", str(p), "--quiet")
    assert code == 1 and "class certificate valid" in out and "independent kernel: rejected: no" in out
    assert err.strip() == "symbounds: certificate rejected by the independent kernel: no"


def test_holder_class_flag_refuses_a_target(capsys):
    code, _, err = run_cli(capsys, "certify", "--holder-class", "--target", "sin(2*x1)")
    assert code == 2 and "--target" in err and "Traceback" not in err


def test_box_bound_encloses_point_values(network):
    """Every box bound is above E at points of the box, including boxes around a centre (where
    |x - c_k|^alpha is not differentiable) and at the cube's ends."""
    from symbounds.core.boxes import Box

    _, net, K = network
    rng = random.Random(3)
    for lo, hi in [(Fraction(0), Fraction(1, 64)), (Fraction(1, 80) - Fraction(1, 10**4), Fraction(1, 80) + Fraction(1, 10**4)),
                   (Fraction(39, 40), Fraction(1)), (Fraction(1, 3), Fraction(1, 3) + Fraction(1, 2**20)),
                   (Fraction(0), Fraction(1))]:
        U = box_upper(net, Box((lo,), (hi,)))
        for _ in range(30):
            x = lo + (hi - lo) * Fraction(rng.randrange(2**16 + 1), 2**16)
            E, _ = point_values(net, (x,))
            assert E <= flint.arb(flint.fmpq(U.numerator, U.denominator)), (lo, hi, x)


def test_class_documents_validate_against_their_schemas(certified, capsys):
    from pathlib import Path

    import jsonschema

    folder = Path(__file__).resolve().parents[3] / "docs" / "schemas"
    cert, _ = certified

    def validator(name):
        s = json.loads((folder / f"{name}.schema.json").read_text())
        jsonschema.Draft202012Validator.check_schema(s)
        return jsonschema.Draft202012Validator(s)

    v = validator("class-certificate")
    v.validate(json.loads(json.dumps(cert)))
    broken = copy.deepcopy(cert)
    broken["worst"]["lower"] = 0.025  # a JSON number where a string is required
    assert not v.is_valid(broken)
    broken = copy.deepcopy(cert)
    del broken["class"]
    assert not v.is_valid(broken)
    code, out, _ = run_cli(capsys, "certify", "--holder-class", "--eps", "1/2", "--holder", "1", "--bound", "1",
                           "--quiet", "--json")
    assert code == 0
    summary = json.loads(out)
    s = validator("class-certify")
    s.validate(summary)
    del summary["worst"]
    assert not s.is_valid(summary)


@pytest.mark.parametrize("argv", [["--prec", "64"], ["--max-boxes", "0"], ["--workers", "2"], ["--eps", "2"],
                                  ["--alpha", "0"]])
def test_holder_class_bad_input_is_one_line(capsys, argv, tmp_path):
    out = tmp_path / "c.json"
    out.write_text("previous\n")
    code, _, err = run_cli(capsys, "certify", "--holder-class", *argv, "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out.read_text() == "previous\n"


def test_library_check_dispatches_class_certificates(certified):
    from symbounds.papers import check_certificate

    cert, _ = certified
    assert check_certificate(cert)["boxes"] == len(cert["boxes"])
    bad = copy.deepcopy(cert)
    bad["model_sha256"] = "0" * 64
    with pytest.raises(Exception, match="digest"):
        check_certificate(bad)


# --- the search (symbounds.core.search over the class problem) -------------------------------------


def test_recorded_bounds_are_each_boxs_own(certified, network):
    """Every recorded bound is the box's own enclosure (rounded up for the record), as check
    re-derives it: never one met with a parent's.  Spot-checked on 40 boxes of the certificate."""
    from symbounds.core.boxes import Box, round_up_record

    cert, _ = certified
    _, net, _ = network
    rng = random.Random(8)
    eps = Fraction(1, 10)
    for b in rng.sample(cert["boxes"], 40):
        box = Box(tuple(Fraction(v) for v in b["lo"]), tuple(Fraction(v) for v in b["hi"]))
        assert Fraction(b["bound"]) == min(round_up_record(box_upper(net, box)), eps)


def test_timeout_ends_undecided_with_a_partial_report(network):
    """eps just above sup E (about 0.025024 at the default instance): one second is far too short to
    bring every box below it; the search ends undecided by the timeout, and what it reports is still
    a cover of the cube whose boxes below eps are proved by their own bounds."""
    from symbounds.core.boxes import boxes_cover_cube
    from symbounds.core.claims import Verdict
    from symbounds.papers.shi_liao.class_bound import search

    _, net, _ = network
    eps = Fraction(2503, 100000)
    res = search(net, eps, ClassOptions(prec=256, timeout=1.0))
    assert res.verdict is Verdict.UNDECIDED and res.stopped == "timeout"
    assert res.seconds < 30
    assert boxes_cover_cube([b for b, _ in res.boxes], 1)
    assert res.undecided and all(u > eps for b, u in res.boxes if b in res.undecided)
    proved = [(b, u) for b, u in res.boxes if u <= eps]
    assert proved and all(box_upper(net, b) <= u for b, u in proved[:20])
    assert res.max_bound > eps >= res.worst_lower


def test_holder_class_timeout_flag(tmp_path, capsys):
    """--timeout is read by --holder-class: at the default instance every box of the starting grid
    is already below eps, so a run stopped at once is proved (with a looser bound) and its
    certificate checks."""
    out = tmp_path / "c.json"
    code, text, _ = run_cli(capsys, "certify", "--holder-class", "--timeout", "0.001", "--quiet", "--out", str(out))
    assert code == 0 and "stopped by the timeout" in text, text
    cert = json.loads(out.read_text())
    assert cert["verdict"] == "proved"
    assert check_class_certificate(cert)["boxes"] == len(cert["boxes"])
    code, _, err = run_cli(capsys, "certify", "--holder-class", "--timeout", "-1")
    assert code == 2 and "--timeout" in err


def test_tampered_network_is_refuted(network):
    """The layer-2 query of the model file scaled by 1/1000 (a flat softmax: every centre weighs on
    every point): the search refutes the class bound, and the 300-bit evaluation of the tampered file
    (no symbounds evaluator) confirms E(x*) > eps at the reported point."""
    from symbounds.core.claims import Verdict
    from symbounds.papers.shi_liao.class_bound import search

    mj, _, K = network
    bad = json.loads(json.dumps(mj))
    q = bad["layers"][2]["heads"][0]["W_Q"]
    bad["layers"][2]["heads"][0]["W_Q"] = [[str(Fraction(v) / 1000) for v in row] for row in q]
    net = class_network(model_from_json(bad), 1, K.centres, 1, 2, 2, 256)
    eps = Fraction(1, 10)
    res = search(net, eps, ClassOptions(prec=256))
    assert res.verdict is Verdict.REFUTED and res.worst_lower > eps
    centres = [tuple(Fraction(str(v)) for v in c) for c in K.centres]
    assert MpModel(bad, 1, 2, 2).E_at(res.worst_x, centres) > mpmath.mpf(1) / 10


def test_spread_softmax_search_converges_and_encloses():
    """At a small M_g the layer-2 weight is spread over many tokens (d = 1, eps = 1/4, P = 16,
    M_g = 22): the box bound must still converge to E (with the denominator cut to a fixed 8
    tokens it stalled above eps on 2,500 boxes of width 1e-5 where sup E is 3 % below eps) and
    stay above E at points of every box."""
    import sympy

    from symbounds.papers.shi_liao.class_bound import search

    inst = Instance(eps=sympy.Rational(1, 4), M_g=22, target="0")
    mj, model, K = class_model(inst)
    net = class_network(model, 1, K.centres, 1, 2, 2, 128)
    res = search(net, Fraction(1, 4), ClassOptions(max_boxes=2000, rtol=Fraction(10**9), prec=128))
    assert res.verdict == "proved" and res.evaluated < 2000
    rng = random.Random(5)
    for box, U in rng.sample(res.boxes, 40):
        bound = flint.arb(flint.fmpq(U.numerator, U.denominator))
        for _ in range(5):
            x = box.lo[0] + (box.hi[0] - box.lo[0]) * Fraction(rng.randrange(2**12 + 1), 2**12)
            E, _ = point_values(net, (x,))
            assert E <= bound, (box, x)


def _softmax_at(net, x):
    """Layer 2's weights at the exact point x, from the scores alone (no cap, no box)."""
    xs = [flint.arb(flint.fmpq(v.numerator, v.denominator)) for v in x]
    s = [net.b[k] + sum((net.A[k][i] * xs[i] for i in range(net.d)), flint.arb(0)) for k in range(len(net.b))]
    m = max(v.mid() for v in s)
    e = [(v - m).exp() for v in s]
    t = sum(e, flint.arb(0))
    return [v / t for v in e]


def test_weight_caps_and_box_bound_enclose_points_at_d2_with_a_spread_softmax():
    """d = 2, P = 36, M_g = 3 (near its class minimum): most tokens are near on every box, so the
    denominators' one-sum part is used.  On each box every cap must be above that token's softmax
    weight at points of the box (the caps come within a few per cent of the weights on small boxes,
    so a cap that is too small shows), and the box bound above E (random boxes from 1/4 down to
    2^-12 wide, around centres and at the cube's corners)."""
    import sympy

    from symbounds.core.boxes import Box
    from symbounds.papers.shi_liao.class_bound import weight_caps

    inst = Instance(d=2, C_H=1, B=1, eps=sympy.Rational(1, 2), M_g=3, target="0")
    mj, model, K = class_model(inst)
    net = class_network(model, 2, K.centres, 1, 1, 1, 128)
    rng = random.Random(11)
    boxes = [Box((Fraction(0), Fraction(0)), (Fraction(1, 8), Fraction(1, 8))),
             Box((Fraction(7, 8), Fraction(7, 8)), (Fraction(1), Fraction(1)))]
    for c in rng.sample(K.centres, 3):
        w = Fraction(1, 2**rng.randrange(3, 12))
        boxes.append(Box(tuple(max(Fraction(0), Fraction(v) - w) for v in c),
                         tuple(min(Fraction(1), Fraction(v) + w) for v in c)))
    for _ in range(12):
        w = Fraction(1, 2**rng.randrange(2, 13))
        lo = tuple(Fraction(rng.randrange(1000), 1000) * (1 - w) for _ in range(2))
        boxes.append(Box(lo, tuple(v + w for v in lo)))
    spread = 0
    for box in boxes:
        caps, far = weight_caps(net, box)
        spread = max(spread, len(caps))
        U = box_upper(net, box)
        bound = flint.arb(flint.fmpq(U.numerator, U.denominator))
        corners = [tuple(box.hi[i] if (j >> i) & 1 else box.lo[i] for i in range(2)) for j in range(4)]
        inner = [tuple(box.lo[i] + (box.hi[i] - box.lo[i]) * Fraction(rng.randrange(2**10 + 1), 2**10)
                       for i in range(2)) for _ in range(8)]
        for x in corners + inner:
            beta = _softmax_at(net, x)
            for k, cap in caps.items():
                assert not (beta[k] > flint.arb(flint.fmpq(cap.numerator, cap.denominator))), (box, x, k)
            assert sum((beta[k] for k in range(len(beta)) if k not in caps), flint.arb(0)) <= \
                flint.arb(flint.fmpq(far.numerator, far.denominator)) + flint.arb(10) ** -30
            E, _ = point_values(net, x)
            assert E <= bound, (box, x)
    assert spread > 8  # more near tokens than the exact denominator terms: the one-sum part ran
