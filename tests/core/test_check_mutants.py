"""`check` must re-verify every box against its own recorded bound.

Two edits of the check path let false certificates through without any other test noticing:
skipping the last box of each batch of 256 (a certificate whose box 255 records the bound 0 was
accepted), and accepting a recomputed bound up to twice the recorded one (every bound scaled by
3/5 was accepted, and check reported ``sup |T - g| <= 0.304688`` where the true sup is 1/2).
docs/mutation-testing.md lists them.  The network here is ``T(x) = x`` and the target
``g = 3 x / 2``, so ``|T - g| = x / 2`` is known exactly on every box.
"""

import copy
from fractions import Fraction as F

import pytest

from symbounds.app.cli import main
from symbounds.core.bound import certify
from symbounds.core.boxes import BATCH, Box, CertifyOptions
from symbounds.core.certificate import CertificateError, write_certificate
from symbounds.core.transformer import Embedding, FeedForward, Readout, Transformer
from symbounds.papers import check_certificate

EPS = F(3, 5)
N_BOXES = 600  # more than two batches of BATCH boxes


def _identity():
    ffn = FeedForward(W1=((1,),), b1=(0,), W2=((1,),), b2=(0,), skip=0)  # relu(x) = x on [0, 1]
    return Transformer(layers=(ffn,), embedding=Embedding(((0,),), ((1,),)), readout=Readout(0, 0))


@pytest.fixture(scope="module")
def cert():
    c, res = certify(_identity(), "3*x1/2", EPS, CertifyOptions(initial=N_BOXES))
    assert res.verdict == "proved" and len(c["boxes"]) == N_BOXES > BATCH
    return c


def _with_bounds(cert, new_bound):
    c = copy.deepcopy(cert)
    for i, b in enumerate(c["boxes"]):
        b["bound"] = str(new_bound(i, F(b["bound"])))
    c["max_bound"] = str(max(F(b["bound"]) for b in c["boxes"]))
    return c


def test_the_certificate_checks_and_its_bounds_are_above_the_truth(cert):
    assert check_certificate(cert)["boxes"] == N_BOXES
    for b in cert["boxes"]:
        assert F(b["bound"]) >= F(b["hi"][0]) / 2  # sup of x/2 over the box


@pytest.mark.parametrize("i", [0, BATCH - 1, BATCH, 2 * BATCH - 1, 2 * BATCH, N_BOXES - 1])
def test_a_box_at_either_end_of_a_batch_recording_bound_zero_is_rejected(cert, i):
    """Box ``i``'s true sup of ``|T - g|`` is ``hi / 2 > 0``; recording 0 there must fail."""
    bad = _with_bounds(cert, lambda j, bd: F(0) if j == i else bd)
    with pytest.raises(CertificateError, match=f"box {i}: the recomputed bound"):
        check_certificate(bad)


@pytest.mark.parametrize("scale", [F(3, 5), F(9, 10)])
def test_every_bound_scaled_down_is_rejected(cert, scale):
    """Every box's bound times 3/5 (the largest would say ``sup <= 0.3047``; the truth is 1/2) or
    9/10: each is now below the true sup on most boxes."""
    bad = _with_bounds(cert, lambda j, bd: bd * scale)
    with pytest.raises(CertificateError, match="the recomputed bound"):
        check_certificate(bad)


def test_one_bound_just_below_its_box_sup_is_rejected_from_the_command_line(cert, tmp_path, capsys):
    """The last box's sup of ``x / 2`` is exactly 1/2: recording 1/2 - 2^-40 there is false."""
    bad = _with_bounds(cert, lambda j, bd: F(1, 2) - F(1, 2**40) if j == N_BOXES - 1 else bd)
    path = tmp_path / "bad.json"
    write_certificate(str(path), bad)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"box {N_BOXES - 1}: the recomputed bound" in err, err


# ------------------------------------------------------------------------------------------
# the pieces of the check path that the certificates above do not reach


@pytest.mark.parametrize("q", [F(1, 3), F(1, 2), F(2**40 + 1, 2**41), F(10**12 + 7, 3), F(1, 10**15), F(7),
                               F(2**31 - 1), F(3, 2**70), F(2**30 + 1, 2**30)])
def test_recorded_bounds_are_rounded_up_to_30_bits_and_no_further(q):
    """``round_up_record(q)``: a dyadic number with at most 31 significant bits (so that a re-run of
    the float pass in another summation order stays below it), ``>= q`` and within ``2^-29`` of it."""
    from symbounds.core.boxes import RECORD_BITS, round_up_record

    r = round_up_record(q)
    assert q <= r <= q * (1 + F(1, 2 ** (RECORD_BITS - 1))), q
    assert r.denominator & (r.denominator - 1) == 0, r
    m = r.numerator
    while m % 2 == 0:
        m //= 2
    assert m.bit_length() <= RECORD_BITS + 1, r
    assert round_up_record(F(0)) == 0


def test_check_refuses_what_is_not_a_certificate(cert):
    """Called directly (not through the command line, which reads the format first): a dict of
    another format, or not a dict at all, is not a certificate."""
    from symbounds.core.bound import rebuild
    from symbounds.core.certificate import NotACertificate
    from symbounds.core.certificate import check_certificate as check_core

    for bad in ({**cert, "format": "symbounds-certificate/0"}, [cert], "cert"):
        with pytest.raises(NotACertificate, match="not a certificate"):
            check_core(bad, rebuild)


@pytest.mark.parametrize("d, reason", [(0, "'d' must be an integer in 1..8"), (9, "'d' must be an integer in 1..8"),
                                       (8, "instance.inputs is not d")])
def test_check_reads_the_dimension_range_before_the_model(cert, d, reason):
    """``d`` outside 1..8 is refused as such; ``d = 8`` passes that test and fails later (the
    recorded instance, ``{"inputs": 1}``, disagrees with it)."""
    bad = copy.deepcopy(cert)
    bad["d"] = d
    bad["claim"] = f"sup over [0,1]^{d} of |T(x) - g(x)| <= eps"
    with pytest.raises(CertificateError, match=reason.replace("(", r"\(")):
        check_certificate(bad)


NAN = "is not a number (use '3', '-7/8' or '0.125')"


def _set(key, value):
    def edit(c):
        c[key] = value
    return edit


def _set_d(value):
    def edit(c):
        c["d"], c["claim"] = value, f"sup over [0,1]^{value} of |T(x) - g(x)| <= eps"
    return edit


@pytest.mark.parametrize("edit, message", [
    (_set_d(9), "'d' must be an integer in 1..8"),
    (_set("eps", "abc"), "eps: 'abc' is not a number (use '3', '-7/8' or '0.125')"),
    (_set("eps", "0"), "eps must lie in (0, 1)"),
    (_set("eps", "1"), "eps must lie in (0, 1)"),
    (_set("eps", "3/2"), "eps must lie in (0, 1)"),
    (_set("prec", 52), "'prec' must be an integer number of bits in 53..65536"),
    (_set("prec", 65537), "'prec' must be an integer number of bits in 53..65536"),
    (_set("format", "symbounds-certificate/0"), "not a certificate ('format' must be 'symbounds-certificate/1')"),
    (_set("boxes", []), "'boxes' must be a non-empty list"),
    (lambda c: c["boxes"][3]["lo"].__setitem__(0, "abc"), f"boxes[3].lo: 'abc' {NAN}"),
    (lambda c: c["boxes"][3]["hi"].__setitem__(0, "x"), f"boxes[3].hi: 'x' {NAN}"),
    (lambda c: c["boxes"][3].__setitem__("bound", "y"), f"boxes[3].bound: 'y' {NAN}"),
    (lambda c: c["boxes"][3].__setitem__("bound", "7/10"), "box 3 records the bound 7/10 > eps = 3/5"),
    (lambda c: c["boxes"][3]["hi"].__setitem__(0, c["boxes"][3]["lo"][0]), "box 3 is not a non-empty box inside [0,1]^1"),
    (lambda c: c["boxes"][3].__setitem__("lo", ["0", "0"]), "box 3 is not a non-empty box inside [0,1]^1"),
    (_set("max_bound", "1/2"), "max_bound is not the largest box bound"),
    (_set("max_bound", "abc"), f"max_bound: 'abc' {NAN}"),
    (lambda c: c["boxes"][-1]["hi"].__setitem__(0, "3/2"), f"box {N_BOXES - 1} is not a non-empty box inside [0,1]^1"),
    (lambda c: c["boxes"][0]["lo"].__setitem__(0, "-1/2"), "box 0 is not a non-empty box inside [0,1]^1"),
    (lambda c: c["boxes"].pop(5), "the boxes do not cover [0,1]^1"),
    (lambda c: c["model"]["layers"][0]["W1"][0].__setitem__(0, "2"), "the model does not match its digest (model_sha256)"),
])
def test_check_names_what_is_wrong_in_one_exact_line(cert, edit, message):
    """The reason a certificate is refused, word for word (it is what the user reads)."""
    from symbounds.core.bound import rebuild
    from symbounds.core.certificate import check_certificate as check_core

    bad = copy.deepcopy(cert)
    edit(bad)
    with pytest.raises(CertificateError) as info:
        check_core(bad, rebuild)
    assert str(info.value) == message


@pytest.mark.parametrize("prec", [53, 65536])
def test_check_accepts_the_lowest_and_highest_precision_it_allows(cert, prec):
    """53 bits (``MIN_CERT_PREC``) and 65536 are inside the range ``check`` accepts.  (Arb's
    enclosures at another precision than the recorded one differ in about the 35th bit, so the
    bounds are given room here.)"""
    loose = _with_bounds(cert, lambda j, bd: bd * F(11, 10))
    assert check_certificate(loose, prec=prec)["boxes"] == N_BOXES


def test_a_box_recording_eps_itself_is_accepted(cert):
    """``bound <= eps`` is the claim: a bound equal to ``eps`` (above the truth) is a proof."""
    ok = _with_bounds(cert, lambda j, bd: EPS if j == 7 else bd)
    assert F(ok["max_bound"]) == EPS
    assert check_certificate(ok)["max_bound"] == str(EPS)


# ------------------------------------------------------------------------------------------
# the end of the check: its progress, the target's grid checks, errors raised inside it


def _rebuild_with(results):
    """The model certificate's rebuild, with the grid-check ``results`` of a construction."""
    from symbounds.core.bound import rebuild

    def rb(cert, d, eps, target, model_prec, prec):
        mj, _ = rebuild(cert, d, eps, target, model_prec, prec)
        return mj, results
    return rb


def test_check_reports_its_progress_after_every_batch(cert):
    from symbounds.core.certificate import check_certificate as check_core

    calls = []
    out = check_core(cert, _rebuild_with([]), progress=lambda done, total: calls.append((done, total)))
    assert calls == [(BATCH, N_BOXES), (2 * BATCH, N_BOXES), (N_BOXES, N_BOXES)]
    assert out == {"boxes": N_BOXES, "max_bound": cert["max_bound"], "eps": "3/5", "d": 1, "boxes_at_recorded_prec": 0}


def test_a_refuted_grid_check_of_the_target_rejects_the_certificate(cert):
    """A construction whose re-run grid check of the target is refuted: the certificate is
    rejected, naming the assumption; an undecided or proved one is no reason to reject."""
    from types import SimpleNamespace

    from symbounds.core.certificate import check_certificate as check_core

    c = copy.deepcopy(cert)
    c["assumptions"] = [{"id": "A1", "statement": "s1", "verdict": "proved"},
                        {"id": "A2", "statement": "s2", "verdict": "refuted"}]
    res = [SimpleNamespace(id="A1", statement="s1", verdict="proved"),
           SimpleNamespace(id="A2", statement="s2", verdict="refuted")]
    with pytest.raises(CertificateError) as info:
        check_core(c, _rebuild_with(res))
    assert str(info.value) == "the target violates assumption A2: s2"
    c["assumptions"][1]["verdict"] = res[1].verdict = "undecided"
    assert check_core(c, _rebuild_with(res))["boxes"] == N_BOXES


@pytest.mark.parametrize("exc, message", [
    (ValueError("first line\nsecond line"), "first line"), (ValueError(), "ValueError"),
    (TypeError("a list is not a number"), "a list is not a number"), (TypeError(""), "TypeError"),
])
def test_an_error_inside_the_check_is_one_line_naming_it(cert, exc, message):
    from symbounds.core.certificate import check_certificate as check_core
    from symbounds.core.modelfile import ModelFileError

    def rb(*args):
        raise exc

    with pytest.raises(CertificateError) as info:
        check_core(cert, rb)
    assert str(info.value) == message and info.value.__suppress_context__ and info.value.__cause__ is None
    with pytest.raises(CertificateError) as info:
        check_core(cert, lambda *a: (_ for _ in ()).throw(ModelFileError("model: layers[0]: no 'W1'")))
    assert str(info.value) == "model: layers[0]: no 'W1'"
    own = CertificateError("the construction's own reason")
    with pytest.raises(CertificateError) as info:
        check_core(cert, lambda *a: (_ for _ in ()).throw(own))
    assert info.value is own
    with pytest.raises(ZeroDivisionError):  # not a bad certificate: an internal error, not hidden
        check_core(cert, lambda *a: 1 / 0)


def test_a_bound_below_the_recomputed_one_is_named_with_both_numbers(cert):
    """The last box (sup of ``x / 2`` exactly 1/2) recording 0: the message gives the recomputed
    bound rounded up and the recorded one rounded down, to 6 digits."""
    import re

    bad = _with_bounds(cert, lambda j, bd: F(0) if j == N_BOXES - 1 else bd)
    with pytest.raises(CertificateError) as info:
        check_certificate(bad)
    assert re.fullmatch(rf"box {N_BOXES - 1}: the recomputed bound is 0\.5\d{{0,5}}, above the recorded 0", str(info.value))
    bad = _with_bounds(cert, lambda j, bd: F(3, 7) if j == N_BOXES - 1 else bd)  # 3/7 = 0.4285714...
    with pytest.raises(CertificateError) as info:
        check_certificate(bad)
    assert re.fullmatch(rf"box {N_BOXES - 1}: the recomputed bound is 0\.5\d{{0,5}}, above the recorded 0\.428571",
                        str(info.value))


def test_a_box_that_cannot_be_enclosed_again_is_named(cert, monkeypatch):
    """A box whose bound the check cannot recompute (both passes fail: forced here, on box 3 of
    the first batch; this model can always be enclosed) is a reason to reject, said as such."""
    from symbounds.core import certificate as C
    from symbounds.core.exact import decimal_down

    real = C.box_bounds
    calls = []

    def fails_on_box_3(*args, **kw):
        out = real(*args, **kw)
        calls.append(len(out))
        return [None if (len(calls), i) == (1, 3) else v for i, v in enumerate(out)]

    monkeypatch.setattr(C, "box_bounds", fails_on_box_3)
    with pytest.raises(CertificateError) as info:
        check_certificate(cert)
    recorded = decimal_down(F(cert["boxes"][3]["bound"]), 6)
    assert str(info.value) == f"box 3: the recomputed bound cannot be enclosed, above the recorded {recorded}"


def test_a_model_that_is_not_the_rebuilt_construction_is_named(cert):
    """The construction's rebuild gives another network than the one recorded (here: ``W1``
    doubled, so ``T(x) = 2 x``): the reason, word for word."""
    from symbounds.core.bound import rebuild
    from symbounds.core.certificate import check_certificate as check_core

    def other(c, d, eps, target, model_prec, prec):
        mj, results = rebuild(c, d, eps, target, model_prec, prec)
        mj = copy.deepcopy(mj)
        mj["layers"][0]["W1"][0][0] = "2"
        return mj, results

    with pytest.raises(CertificateError) as info:
        check_core(cert, other)
    assert str(info.value) == "the model is not the construction for the recorded instance"


# ------------------------------------------------------------------------------------------
# checked at a lower precision than the recorded one


def _third_identity():
    """``T(x) = 3·10^-400 (10^400 x / 3) = x`` on [0, 1]: float64 cannot hold the weights, so every
    box goes to Arb, whose enclosure is wider at 53 bits than at 128 (1/3 is not a float)."""
    big = F(10**400)
    ffn = FeedForward(W1=((big / 3,),), b1=(0,), W2=((3 / big,),), b2=(0,), skip=0)
    return Transformer(layers=(ffn,), embedding=Embedding(((0,),), ((1,),)), readout=Readout(0, 0))


@pytest.fixture(scope="module")
def arb_cert():
    """A certificate whose box bounds are Arb's 128-bit bounds themselves (as a certificate made in
    Arb records them), and the 53-bit bounds of the same boxes."""
    from symbounds.core.boxes import box_bound, box_bounds, float_evaluator
    from symbounds.core.expr import parse_target
    from symbounds.core.modelfile import model_from_json

    c, res = certify(_third_identity(), "3*x1/2", EPS, CertifyOptions(initial=8, fast=False))
    assert res.verdict == "proved" and c["prec"] == 128
    model, g = model_from_json(c["model"]), parse_target("3*x1/2", 1)
    missed = []  # the boxes that neither the float pass nor Arb at 53 bits bound by the recorded bound
    for i, b in enumerate(c["boxes"]):
        box = Box(tuple(map(F, b["lo"])), tuple(map(F, b["hi"])))
        bound = box_bound(model, g, 1, box, 128)
        b["bound"] = str(bound)
        floats = box_bounds(model, g, 1, [box], 53, float_evaluator(model, 53), [bound], recheck=True, arb=False)
        at53 = box_bound(model, g, 1, box, 53)
        if floats[0] is None and (at53 is None or at53 > bound):
            missed.append(i)
    c["max_bound"] = str(max(F(b["bound"]) for b in c["boxes"]))
    return c, missed


def test_a_128_bit_certificate_checked_at_53_bits_is_accepted(arb_cert):
    """On most boxes neither the float pass nor Arb at 53 bits reaches the recorded 128-bit bound
    (asserted, so the test would notice if none did); the check encloses exactly those boxes once
    more at the recorded 128 bits and accepts."""
    cert, missed = arb_cert
    assert len(missed) >= len(cert["boxes"]) // 2
    info = check_certificate(cert, prec=53)
    assert info["boxes"] == len(cert["boxes"]) and info["boxes_at_recorded_prec"] == len(missed)
    assert check_certificate(cert)["boxes_at_recorded_prec"] == 0


def test_a_false_bound_is_rejected_at_either_precision(arb_cert):
    """Box 5's true sup of ``x / 2`` is ``hi / 2``; recorded 2^-200 below it, the retry at the
    recorded precision must not accept it."""
    cert, _ = arb_cert
    bad = copy.deepcopy(cert)
    bad["boxes"][5]["bound"] = str(F(bad["boxes"][5]["hi"][0]) / 2 - F(1, 2**200))
    for prec in (53, None):
        with pytest.raises(CertificateError, match="box 5: the recomputed bound"):
            check_certificate(bad, prec=prec)


def test_a_recorded_precision_out_of_range_is_refused_even_when_another_is_asked(arb_cert):
    cert, _ = arb_cert
    bad = copy.deepcopy(cert)
    bad["prec"] = 1 << 20
    with pytest.raises(CertificateError, match="'prec' must be an integer number of bits in 53..65536"):
        check_certificate(bad, prec=128)
