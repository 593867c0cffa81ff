"""``certify --model G.json|G.onnx --target EXPR --eps E`` for a layer graph, and ``check`` of its
certificate (``symbounds-graph-target-certificate/1``, :mod:`symbounds.core.graph_target`).

Exit codes as for every command: 0 proved, 1 refuted, 2 bad input, 3 undecided; ``check``: 0 valid,
1 rejected.
"""

from __future__ import annotations

import json
import sys

from .args import Bar, UsageError, written

__all__ = ["run_graph_certify", "is_graph_target_certificate", "run_graph_target_check"]


def run_graph_certify(args, graph, eps, prec: int, timeout) -> int:
    """The search over ``[0,1]^d`` (or ``--box``) for output ``--output`` (needed when the graph has
    more than one), its report, and its certificate at ``--out``."""
    from ..core.exact import decimal_up
    from ..core.graph_target import GraphTargetError, certify_graph, make_graph_target_certificate, resolve
    from ..core.version import __version__
    from .certificate_out import STOPPED, check_certificate_out, parse_box, save_certificate

    if args.workers != 1 or args.scheduler is not None:
        raise UsageError("--workers and --scheduler apply to a model file: a layer graph's boxes are searched "
                         "in this process")
    if args.bisect != "widest":
        raise UsageError("--bisect gradient applies to a model file: a layer graph's boxes are halved along "
                         "their widest side")
    lo = hi = None
    if args.box is not None:
        lo, hi = parse_box(args.box)
    try:
        target, k, box = resolve(graph, args.target, args.output, lo, hi)  # every bad part before any work
    except GraphTargetError as e:
        raise UsageError(str(e)) from None
    check_certificate_out(args)
    bar = Bar(args, "box")
    try:
        res = certify_graph(graph, args.target, eps, k, box.lo, box.hi, prec=prec, max_boxes=args.max_boxes,
                            timeout=timeout, progress=lambda f, n: bar.volume(f, n, "the box's volume"))
    except GraphTargetError as e:
        raise UsageError(str(e)) from None
    finally:
        bar.close()
    cert = make_graph_target_certificate(version=__version__, graph=graph, target_text=args.target, eps=eps,
                                         output=k, lo=box.lo, hi=box.hi, prec=prec, result=res)
    out = save_certificate(args, cert) if args.out else None
    if args.json:
        print(json.dumps({key: cert[key] for key in ("verdict", "claim", "d", "output", "eps", "target", "max_bound",
                                                     "counterexample", "seconds", "boxes_evaluated")}
                         | {"boxes": len(cert["leaves"]), "undecided_boxes": len(cert["undecided_boxes"]),
                            "stopped": res.stopped}, indent=2))
    else:
        mb = "-" if res.max_bound is None else decimal_up(res.max_bound, 8)
        print(f"symbounds certify: {cert['claim'].replace('eps', str(eps))}  (layer graph {args.model}, "
              f"target {args.target})")
        print(f"  boxes: {len(res.leaves)} proved ({res.evaluated} evaluated), {len(res.undecided)} undecided")
        print(f"  largest certified error bound: {mb}")
        if res.counterexample:
            ce = res.counterexample
            print(f"  counterexample: x = ({', '.join(ce['x'])}), |Y - g| = {ce['error']} "
                  f"(the graph checked in {'exact rationals' if ce['checked'] == 'exact' else 'balls'})")
        print(f"  time: {res.seconds:.1f} s" + (f"; certificate written to {out}" if out else ""))
        if res.stopped:
            print(f"  stopped by {STOPPED.get(res.stopped, res.stopped)}, {len(res.leaves)} boxes proved so far")
        print(f"verdict: {res.verdict}")
    return {"proved": 0, "refuted": 1, "undecided": 3}[str(res.verdict)]


def is_graph_target_certificate(path: str) -> dict | None:
    """The file's JSON object when it is a graph target certificate, else None."""
    from ..core.graph_target import GRAPH_TARGET_FORMAT
    from .certificate_out import certificate_of_format

    return certificate_of_format(path, GRAPH_TARGET_FORMAT)


def run_graph_target_check(args, cert: dict) -> int:
    """The full re-verification (the main package's rigorous path; the independent kernel does not
    read layer-graph target certificates): 0 valid, 1 rejected."""
    from ..core.exact import decimal_up
    from ..core.graph_target import GraphTargetCertificateError, check_graph_target_certificate

    bar = Bar(args, "box")
    try:
        info = check_graph_target_certificate(cert, progress=lambda done, total: bar(done, total, "boxes re-checked"))
    except GraphTargetCertificateError as e:
        bar.close()
        print(f"symbounds: certificate rejected: {e}", file=sys.stderr)
        return 1
    finally:
        bar.close()
    print(f"certificate valid: {info['leaves']} boxes cover the domain ({info['nodes']} boxes re-evaluated), "
          f"{info['claim'].replace('eps', str(info['eps']))}: every box's bound re-derived, the largest "
          f"{decimal_up(info['max_bound'], 6)}")
    print("independent kernel: not run: it does not read layer-graph target certificates "
          "(re-verified by the main package only)")
    return 0
