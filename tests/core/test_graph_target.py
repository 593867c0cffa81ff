"""Layer graphs against a target (symbounds.core.graph_target): the piecewise-linear interpolant of
x^2 on eight knots, built exactly as a ReLU network (true sup error 1/256 at the knots' midpoints,
found here independently by 300-bit sampling plus a Lipschitz margin), is proved within 5/1024 and
refuted below 1/256 with a counterexample re-checked here in exact rationals; a smooth 2-input graph
``exp(x1 + x2)/8 + 1/1000`` against ``exp(x1 + x2)/8`` (an error of exactly 1/1000 everywhere) is
proved within 1/100, where the mean-value bound cancels the network against the target, and refuted
below 1/1000; the certificate checks and a tampered one (a bound lowered, eps lowered, a weight
changed, a box dropped) is rejected; bad claims are one line."""

import copy
import re
from fractions import Fraction

import pytest

from symbounds.core import graph_target as gt
from symbounds.core.contexts import BallContext
from symbounds.core.graph_file import graph_from_json
from symbounds.core.search import Box, Enclosure

KNOTS = 8


def interpolant_doc():
    """``f(x) = sum_k a_k relu(x - k/8)``, the chord of x^2 on every [k/8, (k+1)/8]: slopes (2k+1)/8."""
    slopes = [Fraction(2 * k + 1, KNOTS) for k in range(KNOTS)]
    a = [slopes[0]] + [slopes[k] - slopes[k - 1] for k in range(1, KNOTS)]
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": 1},
            "nodes": [{"name": "h", "op": "affine", "inputs": ["x"], "W": [["1"]] * KNOTS,
                       "b": [str(-Fraction(k, KNOTS)) for k in range(KNOTS)]},
                      {"name": "r", "op": "relu", "inputs": ["h"]},
                      {"name": "y", "op": "affine", "inputs": ["r"], "W": [[str(v) for v in a]], "b": ["0"]}],
            "output": "y"}


def f_exact(x: Fraction) -> Fraction:
    slopes = [Fraction(2 * k + 1, KNOTS) for k in range(KNOTS)]
    a = [slopes[0]] + [slopes[k] - slopes[k - 1] for k in range(1, KNOTS)]
    return sum(ak * max(x - Fraction(k, KNOTS), 0) for k, ak in enumerate(a))


def sampled_sup(graph, target, n=4096, lipschitz=4):
    """sup |f - g| over [0,1] <= the 300-bit maximum over n + 1 equispaced points + L / (2 n)."""
    ball = BallContext(300)
    best = Fraction(0)
    with ball.scope():
        for i in range(n + 1):
            x = Fraction(i, n)
            (y,) = graph.evaluate(ball, [x])
            e = abs(y - ball.from_sympy(target.g, env={target.xs[0]: ball.convert(x)}))
            best = max(best, Fraction(float(e.upper().mid())) + Fraction(1, 10**12))
    return best + Fraction(lipschitz, 2 * n)


def test_the_interpolant_is_proved_above_its_sup_error_and_refuted_below():
    g = graph_from_json(interpolant_doc())
    target = gt.Target("x1^2", 1)
    margin = sampled_sup(g, target)
    assert Fraction(1, 256) <= margin <= Fraction(5, 1024)  # the independent bound
    res = gt.certify_graph(g, "x1^2", Fraction(5, 1024))
    assert str(res.verdict) == "proved", res
    assert res.max_bound <= Fraction(5, 1024) and res.max_bound >= Fraction(1, 256)  # never below the true sup
    # the leaves cover [0,1] exactly (their lengths sum to 1, no overlaps: sorted, each starts where the last ended)
    ends = sorted((b.lo[0], b.hi[0]) for b, _ in res.leaves)
    assert ends[0][0] == 0 and ends[-1][1] == 1 and all(p[1] == q[0] for p, q in zip(ends, ends[1:]))
    bad = gt.certify_graph(g, "x1^2", Fraction(1, 300))
    assert str(bad.verdict) == "refuted"
    ce = bad.counterexample
    x = Fraction(ce["x"][0])
    assert 0 <= x <= 1 and ce["checked"] == "exact"
    assert abs(f_exact(x) - x * x) > Fraction(1, 300)  # re-checked exactly here


def smooth_doc(bias="1/1000"):
    return {"format": "symbounds-graph/1", "input": {"name": "x", "tokens": 1, "width": 2},
            "nodes": [{"name": "s", "op": "affine", "inputs": ["x"], "W": [["1", "1"]], "b": ["0"]},
                      {"name": "e", "op": "exp", "inputs": ["s"]},
                      {"name": "y", "op": "affine", "inputs": ["e"], "W": [["1/8"]], "b": [bias]}],
            "output": "y"}


def test_a_smooth_graph_is_proved_through_the_mean_value_bound():
    g = graph_from_json(smooth_doc())
    res = gt.certify_graph(g, "exp(x1 + x2)/8", Fraction(1, 100), max_boxes=4000)
    assert str(res.verdict) == "proved", res
    assert res.max_bound >= Fraction(1, 1000)
    bad = gt.certify_graph(g, "exp(x1 + x2)/8", Fraction(1, 2000))
    assert str(bad.verdict) == "refuted" and bad.counterexample["checked"] == "ball"
    # on a box of side 1/16 the interval bound |T(B) - g(B)| is at least the variation of g over B,
    # (e^(9/8) - e)/8 > 0.045; the mean-value bound (the Taylor model met with g's derivatives) is
    # below 1/100, and never below the true error 1/1000
    t = gt.Target("exp(x1 + x2)/8", 2)
    small = Box((Fraction(1, 2), Fraction(1, 2)), (Fraction(9, 16), Fraction(9, 16)))
    enc = gt.graph_evaluator(g, 128).enclose([small])[0]
    assert enc.method == "taylor"
    interval_only = gt.error_bound(t, small, Enclosure(enc.lo, enc.hi, "ball"), 0, 128)
    assert interval_only > Fraction(45, 1000)
    assert Fraction(1, 1000) <= gt.error_bound(t, small, enc, 0, 128) < Fraction(1, 100)


def _cert(graph_doc, target, eps, **kw):
    g = graph_from_json(graph_doc)
    res = gt.certify_graph(g, target, eps, **kw)
    lo, hi = kw.get("lo") or [Fraction(0)] * g.input_count, kw.get("hi") or [Fraction(1)] * g.input_count
    return gt.make_graph_target_certificate(version="test", graph=g, target_text=target, eps=eps, output=0, lo=lo,
                                           hi=hi, prec=128, result=res)


def test_the_certificate_checks_and_tampering_is_rejected():
    cert = _cert(interpolant_doc(), "x1^2", Fraction(5, 1024))
    info = gt.check_graph_target_certificate(cert)
    assert info["leaves"] == len(cert["leaves"]) >= 2
    tampered = []
    c = copy.deepcopy(cert)
    c["leaves"][0][2] = str(Fraction(1, 10**6))  # a bound below the one re-derived
    tampered.append((c, "recomputed bound"))
    c = copy.deepcopy(cert)
    c["eps"] = "1/1000"
    tampered.append((c, "not in [0, eps]"))
    c = copy.deepcopy(cert)
    c["model"]["nodes"][2]["W"][0][0] = "1/7"
    tampered.append((c, "digest"))
    c = copy.deepcopy(cert)
    del c["leaves"][1]
    tampered.append((c, "cover"))
    c = copy.deepcopy(cert)
    c["target"] = "x1^2 + 1/100"
    tampered.append((c, "recomputed bound"))
    for c, words in tampered:
        if words == "cover":
            c["max_bound"] = str(max(Fraction(v[2]) for v in c["leaves"]))
        with pytest.raises(gt.GraphTargetCertificateError, match=re.escape(words)):
            gt.check_graph_target_certificate(c)
    refuted = _cert(interpolant_doc(), "x1^2", Fraction(1, 300))
    with pytest.raises(gt.GraphTargetCertificateError, match="not 'proved'"):
        gt.check_graph_target_certificate(refuted)


def test_a_box_domain_and_an_output_of_several():
    doc = interpolant_doc()
    doc["nodes"][2]["W"].append(["1"] * KNOTS)  # a second output: sum_k relu(x - k/8)
    doc["nodes"][2]["b"].append("0")
    g = graph_from_json(doc)
    with pytest.raises(gt.GraphTargetError, match="2 outputs: pick one with --output"):
        gt.certify_graph(g, "x1^2", Fraction(1, 100))
    with pytest.raises(gt.GraphTargetError, match="numbered 0..1"):
        gt.certify_graph(g, "x1^2", Fraction(1, 100), output=2)
    # output 0 on [1/4, 1/2]: within 5/1024 (the same interpolant); the domain is the box, not [0,1]
    res = gt.certify_graph(g, "x1^2", Fraction(5, 1024), output=0, lo=[Fraction(1, 4)], hi=[Fraction(1, 2)])
    assert str(res.verdict) == "proved"
    assert min(b.lo[0] for b, _ in res.leaves) == Fraction(1, 4) and max(b.hi[0] for b, _ in res.leaves) == Fraction(1, 2)
    # output 1, sum_k relu(x - k/8), is 0 on [0, 0]... and far from x^2 near 1: refuted there
    res = gt.certify_graph(g, "x1^2", Fraction(1, 100), output=1, lo=[Fraction(3, 4)], hi=[Fraction(1)])
    assert str(res.verdict) == "refuted"
    x = Fraction(res.counterexample["x"][0])
    assert abs(sum(max(x - Fraction(k, KNOTS), 0) for k in range(KNOTS)) - x * x) > Fraction(1, 100)


@pytest.mark.parametrize("target,words", [("y1", "unknown"), ("x0", "x0"), ("x2", "x2"),
                                          ("__import__('os')", "--target"), ("x1 +", "--target")])
def test_bad_targets_are_one_line(target, words):
    g = graph_from_json(interpolant_doc())
    with pytest.raises(gt.GraphTargetError) as e:
        gt.certify_graph(g, target, Fraction(1, 10))
    assert words in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(gt.GraphTargetError, match="2 interval"):
        gt.certify_graph(g, "x1", Fraction(1, 10), lo=[0, 0], hi=[1, 1])
