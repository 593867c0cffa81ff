"""``symbounds certify --holder-class`` and ``symbounds check`` of a class certificate.

The bound for every target of the Hölder class H(alpha, C_H, B) (docs/shi_liao.md, "Every target
of the class"): the search and the certificate are in
:mod:`symbounds.papers.shi_liao.class_certificate`; this module reads the flags and prints.
"""

from __future__ import annotations

import json
import sys
from fractions import Fraction

from ..core.certificate import CertificateError
from ..core.exact import decimal_down, decimal_up
from ..core.files import read_json_file
from ..papers.shi_liao.class_bound import ClassOptions
from ..papers.shi_liao.class_certificate import (
    CLASS_FORMAT,
    certify_class,
    check_class_certificate,
    write_class_certificate,
)
from .args import Bar, UsageError, instance, kernel_verdict, precision
from .certificate_out import STOPPED, check_certificate_out, save_certificate, timeout_seconds

__all__ = ["is_class_certificate", "run_class_certify", "run_class_check"]


def _class_summary(cert: dict) -> dict:
    out = {k: cert[k] for k in ("verdict", "claim", "instance", "class", "max_bound", "worst", "seconds",
                                "boxes_evaluated")}
    out["boxes"] = len(cert["boxes"])
    out["undecided_boxes"] = len(cert["undecided_boxes"])
    return out


def run_class_certify(args) -> int:
    """``certify --holder-class``: prove the bound for the whole class (exit 0 proved, 1 refuted,
    3 undecided)."""
    if args.target is not None:
        raise UsageError("--holder-class certifies every target of the class: leave out --target")
    if args.workers != 1 or args.scheduler or args.arb_only or args.bisect != "widest":
        raise UsageError("--holder-class runs in Arb balls in one process: leave out --workers, --scheduler, "
                         "--arb-only and --bisect")
    inst = instance(args)
    precision(args.prec, lo=128, why="the class bound's box enclosures need them")
    if args.max_boxes is None:  # the scaled default of certify is for the single-target search
        args.max_boxes = ClassOptions.max_boxes
    if not (1 <= args.max_boxes <= 10**8):
        raise UsageError(f"--max-boxes {args.max_boxes}: use between 1 and 10^8")
    check_certificate_out(args)
    bar = Bar(args, "box")
    try:
        cert, res = certify_class(inst, ClassOptions(prec=args.prec, max_boxes=args.max_boxes,
                                                     timeout=timeout_seconds(args.timeout)),
                                  lambda n: bar(n, n, "boxes evaluated"))
    except ValueError as e:
        raise UsageError(str(e)) from None
    finally:
        bar.close()
    out = save_certificate(args, cert, write_class_certificate) if args.out else None
    if args.json:
        print(json.dumps(_class_summary(cert), indent=2))
    else:
        w = cert["worst"]
        c = cert["class"]
        print(f"symbounds certify --holder-class: {cert['claim']}, eps = {inst.eps}")
        print(f"  class: alpha = {c['alpha']}, C_H = {c['holder']}, B = {c['bound']}")
        print(f"  boxes: {len(cert['boxes'])} proved ({res.evaluated} evaluated), {len(res.undecided)} undecided")
        print(f"  worst error over the class: in [{decimal_down(res.worst_lower, 8)}, "
              f"{decimal_up(res.max_bound, 8)}]")
        print(f"    above: sup_x E(x) <= {decimal_up(res.max_bound, 8)} (every box)")
        print(f"    below: the target g0 at x* has |T - g0| >= {decimal_down(res.worst_lower, 8)}")
        print(f"  worst point x* = ({', '.join(w['x'])}); E(x*) = {w['E']}, leakage {w['leakage']}")
        print(f"  worst target g0: {w['target']}")
        print(f"  time: {res.seconds:.1f} s" + (f"; certificate written to {out}" if out else ""))
        if res.verdict == "refuted":
            print(f"  counterexample: g0 above, at x*: |T - g0| >= {decimal_down(res.worst_lower, 8)} > eps")
        elif res.stopped is not None and res.undecided:
            print(f"  stopped by {STOPPED[res.stopped]}: {len(res.undecided)} boxes still above eps")
        elif res.stopped is not None:
            print(f"  stopped by {STOPPED[res.stopped]} before the two bounds met (every box is within eps)")
        print(f"verdict: {res.verdict}" + (" (timeout)" if res.stopped == "timeout" and res.undecided else ""))
    return {"proved": 0, "refuted": 1, "undecided": 3}[res.verdict]


def is_class_certificate(path: str) -> dict | None:
    """The file's JSON object when it is a class certificate, else None (also for unreadable files:
    the ordinary certificate reader reports those)."""
    try:
        obj = read_json_file(path, CertificateError, _no_float, _no_float)
    except CertificateError:
        return None
    return obj if isinstance(obj, dict) and obj.get("format") == CLASS_FORMAT else None


def _no_float(text):
    raise CertificateError(f"JSON number {text!r}: numbers must be strings")


def run_class_check(args, cert: dict) -> int:
    """The full re-verification, then the independent kernel (docs/checking.md); 0 if both accept."""
    bar = Bar(args, "box")
    full = 0
    try:
        info = check_class_certificate(cert, progress=lambda done, total: bar(done, total, "boxes re-checked"))
    except CertificateError as e:
        print(f"symbounds: certificate rejected: {e}", file=sys.stderr)
        full = 1
    finally:
        bar.close()
    if not full:
        print(f"class certificate valid: {info['boxes']} boxes cover [0,1]^{info['d']}, every box re-evaluated; "
              f"for every target of the class, sup |T_g - g| <= {decimal_up(Fraction(info['max_bound']), 6)} <= "
              f"eps = {info['eps']} (worst target certified >= {decimal_down(Fraction(info['lower']), 6)})")
    return kernel_verdict(args, full, "boxes")
