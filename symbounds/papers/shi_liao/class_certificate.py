"""Class certificates: [SL26]'s network is within eps of **every** target of a Hölder class.

A class certificate (format ``symbounds-class-certificate/1``, JSON, every number a string) records
the instance (``d``, ``eps``, the overrides ``M``, ``Mg``), the class ``H(alpha, C_H, B)`` instead of a
target, the network as a model file (the construction with the values ``g(c_h) = 0``; every other
target's network differs only in those values, see docs/shi_liao.md, "Every target of the class"),
boxes covering the cube each with a certified upper bound of the class bound ``E`` over it, and the
worst point ``x*`` with the certified lower bound of the worst target ``g_0`` there.
:func:`check_class_certificate` re-derives all of it from the instance.
"""

from __future__ import annotations

import json
from fractions import Fraction

from ...core.boxes import Box, boxes_cover_cube, digest
from ...core.certificate import MIN_CERT_PREC, MODEL_PREC_RANGE, CertificateError
from ...core.contexts import MAX_PREC, BallContext
from ...core.exact import arb_to_fraction, decimal_down, decimal_up, parse_number
from ...core.files import atomic_write
from ...core.modelfile import ModelFileError, model_from_json, model_to_json
from ...core.version import __version__
from .class_bound import ClassOptions, ClassResult, box_upper, class_network, point_values, search, worst_target
from .constants import Instance, constants
from .construction import build

__all__ = ["CLASS_FORMAT", "certify_class", "check_class_certificate", "class_claim", "class_model",
           "write_class_certificate"]

CLASS_FORMAT = "symbounds-class-certificate/1"

#: The top-level fields of a class certificate with their JSON types; no other field is accepted.
FIELDS = {"format": str, "symbounds": str, "claim": str, "construction": str, "instance": dict, "class": dict,
          "prec": int, "model_prec": int, "model_sha256": str, "model": dict, "verdict": str, "max_bound": str,
          "worst": dict, "boxes": list, "undecided_boxes": list, "seconds": str, "boxes_evaluated": int}
_INSTANCE = ("paper", "d", "eps", "M", "Mg")
_CLASS = ("alpha", "holder", "bound")
_WORST = ("x", "lower", "E", "leakage", "target")


def class_claim(d: int) -> str:
    return (f"for every g on [0,1]^{d} with |g| <= B and |g(x) - g(y)| <= C_H |x - y|^alpha: "
            f"sup over [0,1]^{d} of |T_g(x) - g(x)| <= eps")


def _skeleton(inst: Instance) -> Instance:
    """The instance with the target 0 (its network carries every weight but the values g(c_h))."""
    return Instance(d=inst.d, alpha=inst.alpha, C_H=inst.C_H, B=inst.B, eps=inst.eps, target="0", M=inst.M,
                    M_g=inst.M_g)


def class_model(inst: Instance, model_prec: int = 192):
    """``(model_json, model, constants)``: the construction for the class of ``inst`` (values 0)."""
    K = constants(_skeleton(inst))
    mj = model_to_json(build(K), model_prec)
    return mj, model_from_json(mj), K


def _network(inst, model, K, prec):
    return class_network(model, inst.d, K.centres, Fraction(str(inst.alpha)), Fraction(str(inst.C_H)),
                         Fraction(str(inst.B)), prec)


def certify_class(inst: Instance, opts: ClassOptions, progress=None) -> tuple[dict, ClassResult]:
    """Search the cube for ``sup E`` (:func:`~.class_bound.search`) and write the result as a class
    certificate; returns ``(certificate, result)``."""
    mj, model, K = class_model(inst, opts.model_prec)
    net = _network(inst, model, K, opts.prec)
    res = search(net, Fraction(str(inst.eps)), opts, progress)
    s = lambda v: None if v is None else str(v)
    cert = {
        "format": CLASS_FORMAT,
        "symbounds": __version__,
        "claim": class_claim(inst.d),
        "construction": "shi_liao",
        "instance": {"paper": "shi_liao", "d": inst.d, "eps": str(inst.eps), "M": s(inst.M), "Mg": s(inst.M_g)},
        "class": {"alpha": str(inst.alpha), "holder": str(inst.C_H), "bound": str(inst.B)},
        "prec": opts.prec,
        "model_prec": opts.model_prec,
        "model_sha256": digest(mj),
        "model": mj,
        "verdict": str(res.verdict),
        "max_bound": str(res.max_bound),
        "worst": {"x": [str(v) for v in res.worst_x], "lower": str(res.worst_lower),
                  "E": res.worst_E.str(20, radius=True), "leakage": res.worst_leak.str(20, radius=True),
                  "target": worst_target(res.worst_x, net.alpha, net.C_H, net.B)},
        "boxes": [{**b.as_json(), "bound": str(u)} for b, u in res.boxes if u <= Fraction(str(inst.eps))],
        "undecided_boxes": [b.as_json() for b in res.undecided],
        "seconds": f"{res.seconds:.3f}",
        "boxes_evaluated": res.evaluated,
    }
    return cert, res


def write_class_certificate(path: str, cert: dict) -> None:
    atomic_write(path, json.dumps(cert, indent=1) + "\n")


def _req(obj, key, what):
    if not isinstance(obj, dict) or key not in obj:
        raise CertificateError(f"{what}: missing '{key}'")
    return obj[key]


def _exact_keys(obj, keys, what):
    extra = sorted(set(obj) - set(keys))
    if extra:
        raise CertificateError(f"{what}: unknown field {str(extra[0])[:40]!r}")
    for k in keys:
        _req(obj, k, what)


def check_class_certificate(cert: dict, progress=None) -> dict:
    """Re-verify a class certificate from scratch; raises :class:`CertificateError` with the reason.

    1. the format, every field and its type, the claim's wording, the verdict "proved", no
       undecided box, ``prec`` and ``model_prec`` in range;
    2. every recorded box bound is at most ``eps``, and ``max_bound`` is their maximum;
    3. the model is the construction of the recorded instance and class (rebuilt here) and
       matches its digest; the boxes lie in the cube and cover it (exact rationals);
    4. every box's bound of ``E`` is recomputed and must not exceed the recorded one;
    5. the worst point: its target is ``g_0`` at ``x*``, and its recomputed lower bound is at least
       the recorded one (and at most ``max_bound``)."""
    try:
        if not isinstance(cert, dict) or cert.get("format") != CLASS_FORMAT:
            raise CertificateError(f"not a class certificate ('format' must be {CLASS_FORMAT!r})")
        if cert.get("verdict") != "proved":
            raise CertificateError(f"its verdict is {cert.get('verdict')!r}, not 'proved'")
        _exact_keys(cert, FIELDS, "certificate")
        for key, typ in FIELDS.items():
            if not isinstance(cert[key], typ) or (typ is int and isinstance(cert[key], bool)):
                raise CertificateError(f"'{key}' has the wrong JSON type")
        if cert["undecided_boxes"]:
            raise CertificateError("'undecided_boxes' is not empty beside the verdict 'proved'")
        if cert["construction"] != "shi_liao":
            raise CertificateError("'construction' must be 'shi_liao'")
        ij, cj, wj = cert["instance"], cert["class"], cert["worst"]
        _exact_keys(ij, _INSTANCE, "instance")
        _exact_keys(cj, _CLASS, "class")
        _exact_keys(wj, _WORST, "worst")
        d = ij["d"]
        if not isinstance(d, int) or isinstance(d, bool) or not (1 <= d <= 8):
            raise CertificateError("instance.d must be an integer in 1..8")
        if ij["paper"] != "shi_liao":
            raise CertificateError("instance: 'paper' must be 'shi_liao'")
        if cert["claim"] != class_claim(d):
            raise CertificateError(f"'claim' must read {class_claim(d)!r}")
        prec, model_prec = cert["prec"], cert["model_prec"]
        if not (MIN_CERT_PREC <= prec <= MAX_PREC):
            raise CertificateError(f"'prec' must be an integer number of bits in {MIN_CERT_PREC}..{MAX_PREC}")
        if not (MODEL_PREC_RANGE[0] <= model_prec <= MODEL_PREC_RANGE[1]):
            raise CertificateError(f"'model_prec' must be an integer number of bits in "
                                   f"{MODEL_PREC_RANGE[0]}..{MODEL_PREC_RANGE[1]}")
        num = lambda v, w: None if v is None else parse_number(v, w)
        eps = num(ij["eps"], "instance.eps")
        inst = Instance(d=d, alpha=num(cj["alpha"], "class.alpha"), C_H=num(cj["holder"], "class.holder"),
                        B=num(cj["bound"], "class.bound"), eps=eps, target="0", M=num(ij["M"], "instance.M"),
                        M_g=num(ij["Mg"], "instance.Mg"))
        boxes, bounds = [], []
        for i, b in enumerate(cert["boxes"]):
            if not isinstance(b, dict) or set(b) != {"lo", "hi", "bound"}:
                raise CertificateError(f"boxes[{i}] must be an object with exactly 'lo', 'hi' and 'bound'")
            lo = tuple(parse_number(v, f"boxes[{i}].lo") for v in b["lo"])
            hi = tuple(parse_number(v, f"boxes[{i}].hi") for v in b["hi"])
            if len(lo) != d or len(hi) != d or any(not (0 <= a < c <= 1) for a, c in zip(lo, hi)):
                raise CertificateError(f"box {i} is not a non-empty box inside [0,1]^{d}")
            bound = parse_number(b["bound"], f"boxes[{i}].bound")
            if bound > eps:
                raise CertificateError(f"box {i} records the bound {bound} > eps = {eps}")
            boxes.append(Box(lo, hi))
            bounds.append(bound)
        if not boxes:
            raise CertificateError("'boxes' must be a non-empty list")
        max_bound = parse_number(cert["max_bound"], "max_bound")
        if max_bound != max(bounds):
            raise CertificateError("max_bound is not the largest box bound")
        if digest(cert["model"]) != cert["model_sha256"]:
            raise CertificateError("the model does not match its digest (model_sha256)")
        mj, model, K = class_model(inst, model_prec)
        if digest(mj) != cert["model_sha256"]:
            raise CertificateError("the model is not the construction for the recorded instance and class")
        if not boxes_cover_cube(boxes, d):
            raise CertificateError(f"the boxes do not cover [0,1]^{d}")
        net = _network(inst, model, K, prec)
        for i, (box, bound) in enumerate(zip(boxes, bounds)):
            again = box_upper(net, box)
            if again > bound:
                raise CertificateError(f"box {i}: the recomputed bound {decimal_up(again, 6)} is above the "
                                       f"recorded {decimal_down(bound, 6)}")
            if progress is not None and (i % 64 == 63 or i == len(boxes) - 1):
                progress(i + 1, len(boxes))
        x = tuple(parse_number(v, "worst.x") for v in wj["x"]) if isinstance(wj["x"], list) else ()
        if len(x) != d or any(not (0 <= v <= 1) for v in x):
            raise CertificateError(f"worst.x must be a point of [0,1]^{d}")
        if wj["target"] != worst_target(x, net.alpha, net.C_H, net.B):
            raise CertificateError("worst.target is not the worst target g_0 at worst.x")
        lower = parse_number(wj["lower"], "worst.lower")
        E, leak = point_values(net, x)
        with BallContext(prec).scope():
            again = arb_to_fraction((E - leak).lower())
        if again < lower:
            raise CertificateError(f"worst.lower: the recomputed lower bound {decimal_down(again, 6)} is below the "
                                   f"recorded {decimal_up(lower, 6)}")
        if lower > max_bound:
            raise CertificateError("worst.lower is above max_bound")
    except (ModelFileError, ValueError, TypeError) as e:
        if isinstance(e, CertificateError):
            raise
        raise CertificateError(f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    return {"boxes": len(boxes), "max_bound": str(max_bound), "lower": str(lower), "eps": str(eps), "d": d}


def class_verdict(K, inst: Instance, opts: ClassOptions, confirm: bool = True) -> tuple[str, dict]:
    """The class criterion of ``symbounds tighten``: pass / fail / undecided, with evidence, for the
    network of the constants ``K`` (built for the target 0; ``K.inst`` carries the class and ε).

    The search stops as soon as every box's bound is at most ε (no two-sided refinement).  A fail
    is the worst target ``g_0`` at ``x*`` with its certified error above ε; with ``confirm``, the
    network built for ``g_0`` (the same constants) is also certified box by box over the cube,
    which must come out refuted with a counterexample point of its own."""
    from ...core.boxes import CertifyOptions, certify_model
    from ...core.exact import decimal_up as up

    model_json = model_to_json(build(K), opts.model_prec)
    net = _network(inst, model_from_json(model_json), K, opts.prec)
    eps = Fraction(str(inst.eps))
    res = search(net, eps, ClassOptions(initial=opts.initial, min_width=opts.min_width, max_boxes=opts.max_boxes,
                                       rtol=Fraction(10**9), prec=opts.prec, model_prec=opts.model_prec))
    if res.verdict == "proved":
        return "pass", {"boxes": len(res.boxes), "max_bound": up(res.max_bound)}
    if res.verdict != "refuted":
        return "undecided", {"undecided_boxes": len(res.undecided)}
    g0 = worst_target(res.worst_x, net.alpha, net.C_H, net.B)
    with BallContext(opts.prec).scope():
        err = (res.worst_E - res.worst_leak).str(12, radius=True)
    ev = {"x": [str(v) for v in res.worst_x], "error": f">= {decimal_down(res.worst_lower, 8)}", "target": g0,
          "lower": err}
    if confirm:
        from .constants import constants_from

        K0 = constants_from(dataclass_replace(K.inst, target=g0), K.centres, K.r_g, K.P_paper, m=K.m)
        r0 = certify_model(model_to_json(build(K0), opts.model_prec), g0, inst.d, eps,
                           CertifyOptions(prec=opts.prec, model_prec=opts.model_prec))
        ev["certify_target"] = {"verdict": r0.verdict, "counterexample": r0.counterexample}
    return "fail", ev


def dataclass_replace(obj, **changes):
    import dataclasses

    return dataclasses.replace(obj, **changes)
