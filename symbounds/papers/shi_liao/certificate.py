"""Whole-cube certificates for the partition-of-unity network (``symbounds certify``/``check``).

The certified network is the construction's weights written at ``model_prec`` bits (the model file
format) and read back exactly; the boxes are evaluated by :mod:`symbounds.core.boxes`, the file is
written and re-checked by :mod:`symbounds.core.certificate`.  This module supplies the paper's
part: the instance -> model, and the target's assumptions (Hölder and sup-norm on a grid).
"""

from __future__ import annotations

from ...core.boxes import CertifyOptions, CertifyResult, certify_model
from ...core.certificate import CertificateError, make_certificate
from ...core.claims import decide
from ...core.contexts import BallContext
from ...core.exact import parse_number
from ...core.modelfile import ModelFileError, model_to_json
from ...core.version import __version__
from .claims import measure_assumptions
from .constants import CERTIFY_MAX_TOKENS, Instance, constants
from .construction import build

__all__ = ["certify_instance", "default_max_boxes", "rebuild", "setup_memory_estimate"]

#: Peak memory of the model file and float setup per ``P^2`` (bytes), fitted with a margin on
#: ``benchmarks/bench_certify_memory.py`` (BENCHMARKS.md, "One-off setup": a growth of 191, 164
#: and 148 bytes per P^2 at P = 529, 1024 and 2025, the float setup's shared rows making it
#: quadratic); about twice the largest of them, so that with SETUP_BASE_BYTES the estimate is
#: 2.4 to 3.3 times the measured peaks.
SETUP_BYTES_PER_P2 = 320
#: Memory of the interpreter and libraries before the setup (bytes).
SETUP_BASE_BYTES = 400 * 2**20


def setup_memory_estimate(P: int, d: int) -> int:
    """Bytes the certificate's one-off work at ``P`` tokens needs (model file, float setup), an
    over-estimate from measurements: ``SETUP_BASE_BYTES + SETUP_BYTES_PER_P2 P^2``."""
    return SETUP_BASE_BYTES + SETUP_BYTES_PER_P2 * P * P


def available_memory() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes (None where the system does not say)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def default_max_boxes(P: int, d: int) -> int:
    """The box budget when none is given: ``max(200000, 8 d P^1.5)``, about four times the boxes
    the d = 2 and d = 3 certificates evaluate (which grow like ``P^1.5``; BENCHMARKS.md)."""
    return max(200_000, min(10**8, 8 * d * round(P**1.5)))


def certify_instance(inst, opts: CertifyOptions, progress=None) -> tuple[dict, CertifyResult]:
    """Certify the construction of ``inst`` over the whole cube; returns (certificate, result).
    ``progress(fraction, evaluated)``: see :func:`symbounds.core.boxes.certify_model`.  Grids above
    1024 tokens are accepted up to ``CERTIFY_MAX_TOKENS`` when the setup's estimated memory
    (:func:`setup_memory_estimate`) fits in the memory available; ``opts.max_boxes = None``
    takes :func:`default_max_boxes`."""
    P = _grid_tokens(inst)
    if P is not None:  # refused before the constants, whose centres and g(c_k) are O(P) SymPy work
        _check_memory(P, inst.d)
    K = constants(inst, max_tokens=CERTIFY_MAX_TOKENS)
    _check_memory(K.P, inst.d)
    if opts.max_boxes is None:
        from dataclasses import replace

        opts = replace(opts, max_boxes=default_max_boxes(K.P, inst.d))
    mj = model_to_json(build(K), opts.model_prec)
    ball = BallContext(opts.prec)
    assumptions = [decide(ball, m) for m in measure_assumptions(ball, K)]
    try:
        res = certify_model(mj, inst.target_text, inst.d, inst.eps, opts, progress)
    except ModelFileError:  # reading the network back, before any box: a weight a model file cannot hold
        raise ValueError(_not_storable(mj, assumptions)) from None
    if any(a.verdict == "refuted" for a in assumptions):
        res.verdict = "refuted"
    elif res.verdict == "proved" and any(a.verdict == "undecided" for a in assumptions):
        res.verdict = "undecided"
    cert = make_certificate(version=__version__, construction="shi_liao", instance=inst.as_json(), d=inst.d,
                            eps=inst.eps, target=inst.target_text, prec=opts.prec, model_prec=opts.model_prec,
                            model_json=mj, res=res, assumptions=assumptions)
    return cert, res


def _grid_tokens(inst) -> int | None:
    """``P = m^d`` of the cube grid :func:`constants` builds at ``inst`` (``m = ceil(sqrt(d) /
    (2 r_g))``), without building it; None where :func:`constants` refuses the grid anyway."""
    import sympy

    from .constants import ceiling_exact, grid_ratio, r_g_of

    ratio = grid_ratio(inst.d, r_g_of(inst.eps, inst.C_H, inst.alpha))
    try:  # a coarse value first: a ratio far above the limit is left to constants' own refusal
        if not float(sympy.N(ratio, 30)) <= CERTIFY_MAX_TOKENS + 1:
            return None
    except (TypeError, ValueError, OverflowError):
        return None
    P = ceiling_exact(ratio) ** inst.d
    return P if 2 <= P <= CERTIFY_MAX_TOKENS else None


def _check_memory(P: int, d: int) -> None:
    need, have = setup_memory_estimate(P, d), available_memory()
    if have is not None and need > have:
        raise ValueError(f"P = {P} tokens: the certificate's setup needs about {need / 2**30:.1f} GiB, more than the "
                         f"{have / 2**30:.1f} GiB of memory available; raise eps")


def _not_storable(mj: dict, assumptions) -> str:
    """Why the network of an instance cannot be embedded in a certificate, in the instance's terms
    (the model file's field names are the tool's, not the user's)."""
    import json
    import re

    exps = [abs(int(m.group(1))) for m in re.finditer(r'e([+-]?[0-9]+)"', json.dumps(mj["layers"]))]
    size = f"about 10^{max(exps)}" if exps else "a number"
    refuted = [a.id for a in assumptions if a.verdict == "refuted"]
    why = f"; the assumptions on g are refuted ({', '.join(refuted)}; symbounds pou shows them)" if refuted else ""
    return (f"the network of this instance has a weight of {size}, beyond the decimal exponents up to 1000 "
            f"that a certificate holds{why}")


_INSTANCE_FIELDS = {"paper", "d", "alpha", "holder", "bound", "eps", "target", "M", "Mg"}


def _field(obj, key):
    if not isinstance(obj, dict) or key not in obj:
        raise CertificateError(f"instance: missing '{key}'")
    return obj[key]


def rebuild(cert: dict, d: int, eps, target: str, model_prec: int, prec: int):
    """The model file the recorded instance gives, and the target's grid checks (see
    :func:`symbounds.core.certificate.check_certificate`)."""
    inst_json = _field(cert, "instance")
    unknown = sorted(set(inst_json) - _INSTANCE_FIELDS)
    if unknown:
        raise CertificateError(f"instance: unknown field {str(unknown[0])[:40]!r}")
    missing = sorted(_INSTANCE_FIELDS - set(inst_json))
    if missing:  # every field is written (None for M and Mg when derived)
        raise CertificateError(f"instance: missing '{missing[0]}'")
    if inst_json.get("paper") != "shi_liao" or cert.get("construction") != "shi_liao":
        raise CertificateError("instance: 'paper' disagrees with the construction")
    if _field(inst_json, "target") != target:
        raise CertificateError("the instance disagrees with the claim (instance.target is not target)")
    if any(not (v is None or isinstance(v, str)) for k, v in inst_json.items() if k != "d"):
        raise CertificateError("instance: every number must be a string")
    inst = Instance(
        d=d, alpha=_field(inst_json, "alpha"), C_H=_field(inst_json, "holder"), B=_field(inst_json, "bound"),
        eps=eps, target=target, M=inst_json.get("M"), M_g=inst_json.get("Mg"),
    )
    if type(inst_json.get("d")) is not int or inst_json.get("d") != d or parse_number(inst_json.get("eps", "0"), "instance.eps") != eps:
        raise CertificateError("the instance disagrees with the claim (d or eps)")
    K = constants(inst, max_tokens=CERTIFY_MAX_TOKENS)
    ball = BallContext(prec)
    return model_to_json(build(K), model_prec), [decide(ball, m) for m in measure_assumptions(ball, K)]
