"""The float point pass at a box's centre (boxes.centre_refutes) only for boxes with a model
(``boxes.CENTRE_PASS_NO_MODEL = False``; a box the float pass could not enclose leaves its centre
to its halves): every instance the old rule (True) refutes is refuted under the new one too, with
a real counterexample (the error there in 300-bit balls exceeds eps, an independent evaluation),
and a proved instance stays proved with the same boxes.  The cases: tampered models (one value
weight +1: the network off near one centre), a model certified at an eps below its true
error, and the instance itself, with the plain and the tight pass."""

from fractions import Fraction as F

import flint
import pytest

from symbounds.core import boxes as bx
from symbounds.core.boxes import CertifyOptions, certify_model, point_error
from symbounds.core.modelfile import model_from_json, model_to_json
from symbounds.papers import shi_liao as sl

SMALL = dict(alpha="1/2", C_H="1/2", B="1/4", eps="1/2", target="sin(x1)/4")  # P = 8
D2 = dict(d=2, C_H=1, B=1, target="sin(x1+x2)/2")


def _model(inst, head=None, by=0):
    K = sl.constants(inst)
    mj = model_to_json(sl.build(K), 192)
    if head is not None:
        mj["layers"][0]["heads"][head]["W_V"][1][K.d] = str(F(mj["layers"][0]["heads"][head]["W_V"][1][K.d]) + by)
    return mj


def _tampered():
    inst = sl.Instance(**SMALL)
    return _model(inst, 3, 1), inst.target_text, 1, F(inst.eps), inst.target_expr()


def _d2(eps=None, head=None, by=0):
    inst = sl.Instance(eps="2/5", **D2)  # P = 64
    return _model(inst, head, by), inst.target_text, 2, F(eps or inst.eps), inst.target_expr()


CASES = {"tampered-d1": _tampered, "tampered-d2": lambda: _d2(head=3, by=1),
         "d2-eps-below-its-error": lambda: _d2(eps="1/20"), "d2-proved": _d2}


def _certify(case, tight, rule, monkeypatch):
    mj, text, d, eps, g = CASES[case]()
    monkeypatch.setattr(bx, "CENTRE_PASS_NO_MODEL", rule)
    res = certify_model(mj, text, d, eps, CertifyOptions(tight=tight, max_boxes=20000))
    return res, mj, d, eps, g


@pytest.mark.parametrize("tight", [False, True])
@pytest.mark.parametrize("case", list(CASES))
def test_the_new_rule_refutes_what_the_old_refutes(case, tight, monkeypatch):
    old, mj, d, eps, g = _certify(case, tight, True, monkeypatch)
    new, *_ = _certify(case, tight, False, monkeypatch)
    assert str(new.verdict) == str(old.verdict), (case, tight, old.verdict, new.verdict)
    if str(old.verdict) == "refuted":
        x = [F(v) for v in new.counterexample["x"]]
        err = point_error(model_from_json(mj), g, d, x, 300)
        assert err > flint.arb(eps.numerator) / eps.denominator, (err, eps)
    if str(old.verdict) == "proved":
        assert [(b.lo, b.hi) for b, _ in new.boxes] == [(b.lo, b.hi) for b, _ in old.boxes]


def test_some_case_is_refuted(monkeypatch):
    """The cases are not vacuous: the tampered models and the small eps are refuted, the instance
    proved (old rule)."""
    for case in CASES:
        res, *_ = _certify(case, False, True, monkeypatch)
        assert str(res.verdict) == ("proved" if case == "d2-proved" else "refuted"), (case, res.verdict)
