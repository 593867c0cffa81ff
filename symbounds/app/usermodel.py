"""Commands for a user's own network: ``bound``, ``certify --model/--spec``, ``export``, ``import``.

Exit codes as for every command: 0 proved (or done), 1 refuted, 2 bad input, 3 undecided.
"""

from __future__ import annotations

import json
import os
import sys

from ..core.bound import DEFAULT_MAX_BOXES, DEFAULT_TOL, BoundError, BoundUndecided, bound, certify
from ..core.boxes import CertifyOptions
from ..core.certificate import write_certificate
from ..core.exact import decimal_down, decimal_up
from ..core.expr import ExprError
from ..core.modelfile import ModelFileError, load_model
from .args import Bar, UsageError, check_out_folders, number, precision, written
from .certificate_out import STOPPED, check_certificate_out, destination, parse_box, save_certificate, timeout_seconds

__all__ = ["MODEL_COMMANDS", "add_bound_arguments", "add_export_arguments", "add_import_arguments",
           "add_model_certify_arguments", "run_model_certify", "parse_box", "check_certificate_out",
           "destination", "save_certificate", "STOPPED", "timeout_seconds"]


def add_bound_arguments(b) -> None:
    """The flags of ``symbounds bound`` (its parser is made by the command line)."""
    b.description = ("A certified enclosure of a model file's output over an input box: the box is cut (--split, "
                     "--width), the network evaluated on each sub-box with first-order Taylor models (interval "
                     "balls where they fail), and the union printed with its lower end rounded down and its "
                     "upper end rounded up.  Exit 0, 2 bad input, 3 undecided.")
    b.epilog = ("examples:\n"
                "  symbounds bound net.json --box 0:1 --split 6\n"
                "  symbounds bound net.json --box=-1:1,0:1/2 --width 1/16 --json")
    b.add_argument("model", metavar="MODEL.json", help="a model file (symbounds-transformer/1 or the layer graph "
                                                        "symbounds-graph/1), or an ONNX graph (imported on the "
                                                        "fly; extra: onnx)")
    b.add_argument("--box", required=True, metavar="LO:HI[,LO:HI...]",
                   help="one interval per input; token-set models: D*n intervals, token by token "
                        "(interval j*D + r bounds feature r of token j); write --box=-1:1 for a "
                        "negative first end")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--tol", default=None, metavar="T",
                   help=f"adaptive (the default): refine where the enclosure sticks out of the sampled range "
                        f"until it is within a factor 1 + T of it (default {DEFAULT_TOL})")
    g.add_argument("--split", type=int, default=None, metavar="DEPTH",
                   help="a fixed partition: bisect the widest side DEPTH times (2^DEPTH sub-boxes)")
    g.add_argument("--width", default=None, metavar="W",
                   help="a fixed partition: bisect until every side is at most W")
    b.add_argument("--max-boxes", type=int, default=DEFAULT_MAX_BOXES,
                   help=f"adaptive: evaluate at most this many boxes (default {DEFAULT_MAX_BOXES})")
    b.add_argument("--timeout", default=None, metavar="SECONDS",
                   help="adaptive: stop refining after this many seconds (the bound so far is reported)")
    b.add_argument("--prec", type=int, default=128, help="precision in bits (default 128)")
    b.add_argument("--linear", choices=("auto", "on", "off"), default="auto",
                   help="meet each sub-box's Taylor-model enclosure with backward linear bounds (CROWN family, "
                        "rounded outward; for a layer graph also its activations, LayerNorm and RMSNorm): auto "
                        "(the default) for small networks")
    b.add_argument("--json", action="store_true", help="print one JSON object")
    b.add_argument("--quiet", action="store_true", help="no progress output")


def add_export_arguments(e) -> None:
    """The flags of ``symbounds export``."""
    e.description = ("Write a model file (symbounds-transformer/1, tokens as rows: X = Z^T) or a layer graph "
                     "(symbounds-graph/1, or an .onnx file read as one) as a float64 ONNX graph that onnxruntime "
                     "runs; 'symbounds import' reads it back.  Needs the extra symbounds[onnx].")
    e.epilog = "example:\n  symbounds pou --export net.json && symbounds export net.json --onnx net.onnx"
    e.add_argument("model", metavar="MODEL.json")
    e.add_argument("--onnx", required=True, metavar="OUT.onnx", help="the ONNX file to write")
    e.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="the element type of a layer graph's export (default float64; onnxruntime's CPU "
                        "kernels lack float64 Erf and Softplus)")


def add_import_arguments(i) -> None:
    """The flags of ``symbounds import``."""
    i.description = ("Read an ONNX graph into a model file, every float weight taken as its exact binary "
                     "rational: a symbounds-transformer/1 file for a stack of attention and feed-forward layers, "
                     "else a layer graph, symbounds-graph/1 (MLPs, activations, normalisations: "
                     "docs/model-graph.md); the operations supported are listed in the README, 'Your own "
                     "network'.  An unsupported node is refused with one line naming it (exit 2).  Needs "
                     "symbounds[onnx].")
    i.epilog = "example:\n  symbounds import net.onnx --out net.json && symbounds bound net.json --box 0:1"
    i.add_argument("onnx", metavar="IN.onnx")
    i.add_argument("--out", required=True, metavar="MODEL.json", help="the model file to write")


def add_model_certify_arguments(c) -> None:
    c.add_argument("--model", default=None, metavar="MODEL.json",
                   help="certify a model file (or an ONNX graph, imported on the fly) instead of a construction "
                        "(with --target and --eps, or --spec)")
    c.add_argument("--spec", default=None, metavar="PROP.vnnlib",
                   help="with --model: prove that no input of the property's box reaches its unsafe outputs")
    c.add_argument("--force", action="store_true",
                   help="replace a proved certificate at --out even when this run does not prove "
                        "(otherwise it is kept and this one is written beside it, CERT.refuted.json or "
                        "CERT.undecided.json)")
    c.add_argument("--timeout", default=None, metavar="SECONDS",
                   help="stop after this many seconds of the box search (undecided, with the part proved so far)")
    c.add_argument("--output", type=int, default=None, metavar="K",
                   help="with --model LAYER-GRAPH --target: the output certified (0-based, row by row; needed when "
                        "the graph has more than one)")
    c.add_argument("--box", default=None, metavar="LO:HI[,LO:HI...]",
                   help="with --model LAYER-GRAPH --target: the domain instead of [0,1]^d, one interval per input "
                        "(write --box=-1:1 for a negative first end)")
    c.add_argument("--result", default=None, metavar="OUT.txt",
                   help="with --spec and --timeout: write the VNN-COMP result file (unsat, sat and its witness, "
                        "timeout, unknown or error); an unsat's certificate goes to --out (default OUT.cert.json)")


def _prec(p: int) -> int:
    return precision(p)


def _load(path: str):
    """A model file, or an ONNX graph imported on the fly (by its name, ``.onnx``, or its bytes)."""
    from ..core.vnncomp import VnncompError, load_network

    from ..core.networks import load_network as load_any
    from ..core.onnx_io import OnnxError

    if path.endswith(".onnx"):  # a model file's network, else a layer graph
        try:
            return load_any(path)
        except OnnxError as e:
            raise UsageError(str(e)) from None
    if path.endswith(".onnx.gz"):
        try:
            return load_network(path)[0]
        except VnncompError as e:
            raise UsageError(str(e)) from None
    try:
        return load_any(path)
    except ModelFileError as e:
        if "not valid JSON" not in str(e):
            raise UsageError(str(e)) from None
        try:  # not JSON: an ONNX graph under another name, or neither (one line saying so)
            return load_network(path)[0]
        except VnncompError as e2:
            raise UsageError(str(e2)) from None


def _bound(args) -> int:
    model = _load(args.model)
    lo, hi = parse_box(args.box)
    width = tol = None
    if args.width is not None:
        width = number(args.width, "--width")
        if width <= 0:
            raise UsageError("--width must be positive")
    if args.tol is not None:
        tol = number(args.tol, "--tol")
        if not (0 < tol <= 100):
            raise UsageError("--tol: use a number in (0, 100]")
    if args.split is not None and not (0 <= args.split <= 16):
        raise UsageError(f"--split {args.split}: use 0..16")
    if not (1 <= args.max_boxes <= 10**8):
        raise UsageError(f"--max-boxes {args.max_boxes}: use between 1 and 10^8")
    timeout = timeout_seconds(args.timeout)
    bar = Bar(args, "box")
    try:
        res = bound(model, lo, hi, split=args.split, width=width, prec=_prec(args.prec), tol=tol,
                    max_boxes=args.max_boxes, timeout=timeout,
                    progress=lambda f, n: bar.volume(f, n, "the box's volume"),
                    linear={"auto": "auto", "on": True, "off": False}[args.linear])
    except BoundError as e:
        raise UsageError(str(e)) from None
    except BoundUndecided as e:
        print(f"symbounds: undecided: {e}", file=sys.stderr)  # stdout stays empty (no JSON to parse)
        return 3
    finally:
        bar.close()
    scalar = not isinstance(res.lower, tuple)
    wrap = (lambda v: [v]) if scalar else list
    los, his, slo, shi = wrap(res.lower), wrap(res.upper), wrap(res.sampled_lower), wrap(res.sampled_upper)
    one = (lambda v: v[0]) if scalar else (lambda v: v)
    if args.json:
        out = {"lower": one([decimal_down(v, 30) for v in los]), "upper": one([decimal_up(v, 30) for v in his]),
               "lower_exact": one([str(v) for v in los]), "upper_exact": one([str(v) for v in his]),
               "sampled_lower": one([None if v is None else decimal_up(v, 30) for v in slo]),
               "sampled_upper": one([None if v is None else decimal_down(v, 30) for v in shi]),
               "boxes": res.boxes, "evaluated": res.evaluated, "seconds": round(res.seconds, 3), "method": res.method,
               "mode": res.mode, "tol": None if res.tol is None else str(res.tol), "stopped": res.stopped}
        if res.shape is not None:
            out["shape"] = list(res.shape)
        print(json.dumps(out, indent=2))
        return 0
    names = {"taylor": "first-order Taylor models", "linear": "first-order Taylor models met with linear relaxations", "ball": "interval balls",
             "exact": "exact rationals"}
    how = ", ".join(names[m] for m in res.method.split("+"))
    what = (f"adaptive (tolerance {res.tol})" if res.mode == "adaptive" else "fixed partition")
    print(f"symbounds bound: {args.model} over {len(lo)} input interval(s), {res.boxes} sub-box(es) "
          f"({res.evaluated} evaluated, {what}), {how}")
    from ..core.graph import Graph

    if isinstance(model, Graph):  # row t, column c of the output tensor [tokens, width]
        labels = [f"Y[{k // res.shape[0]}, {k % res.shape[0]}]" for k in range(len(los))]
    else:
        labels = ["output"] if scalar else [f"Z[{k % res.shape[0]}, {k // res.shape[0]}]" for k in range(len(los))]
    for label, a, b, sa, sb in zip(labels, los, his, slo, shi):
        print(f"  {label} in [{decimal_down(a)}, {decimal_up(b)}]  (certified)")
        sa, sb = ("-" if sa is None else decimal_up(sa)), ("-" if sb is None else decimal_down(sb))
        print(f"  {' ' * len(label)} reaches [{sa}, {sb}]  (sampled: values at points)")
    if res.stopped is not None:
        print(f"  stopped by {STOPPED[res.stopped]} before the tolerance was reached")
    print(f"  time: {res.seconds:.2f} s")
    return 0


def run_model_certify(args) -> int:
    """``certify --model MODEL (--target EXPR --eps E | --spec PROP)``."""
    if args.model is None:
        raise UsageError("--spec needs --model MODEL.json")
    for flag in ("d", "alpha", "holder", "bound", "M", "Mg"):  # the construction's instance flags
        if getattr(args, flag, None) is not None:
            raise UsageError(f"--{flag}: not used with --model (the model file is the network)")
    prec = _prec(args.prec)
    if getattr(args, "result", None) is not None and args.spec is None:
        raise UsageError("--result is used with --spec PROP.vnnlib (and --timeout)")
    if args.spec is not None:
        if args.target is not None or args.eps is not None or args.force:
            raise UsageError("--spec replaces --target, --eps and --force")
        if args.output is not None or args.box is not None:
            raise UsageError("--output and --box are used with --target (the property file has its own box)")
        if getattr(args, "result", None) is not None:
            from .vnncomp_cli import certify_result

            return certify_result(args, prec, timeout_seconds(args.timeout))
        return _certify_spec(args, prec)
    if args.target is None or args.eps is None:
        raise UsageError("--model needs --target EXPR and --eps E (or --spec PROP.vnnlib)")
    eps = number(args.eps, "--eps")
    if not (1 <= args.max_boxes <= 10**8):
        raise UsageError(f"--max-boxes {args.max_boxes}: use between 1 and 10^8")
    from ..core.graph import Graph

    model = _load(args.model)  # every malformed part reported before any work
    if isinstance(model, Graph):  # a layer graph: its own search (app/graph_target_cli.py)
        from .graph_target_cli import run_graph_certify

        if eps <= 0:
            raise UsageError("--eps must be positive")
        return run_graph_certify(args, model, eps, prec, timeout_seconds(args.timeout))
    if args.output is not None or args.box is not None:
        raise UsageError("--output and --box apply to a layer graph (a model file is certified over [0,1]^d, "
                         "its one output)")
    if args.timeout is not None:
        raise UsageError("--timeout is used with --spec or a layer graph (the whole-cube search has --max-boxes)")
    if not (0 < eps < 1):
        raise UsageError("--eps must lie in (0, 1)")
    if not (1 <= args.workers <= 256):
        raise UsageError(f"--workers {args.workers}: use between 1 and 256")
    check_certificate_out(args)
    bar = Bar(args, "box")
    try:
        cert, res = certify(args.model, args.target, eps,
                            CertifyOptions(prec=prec, workers=args.workers, scheduler=args.scheduler,
                                           max_boxes=args.max_boxes, fast=not args.arb_only,
                                           split=args.bisect),
                            lambda done, total: bar(done, total, "boxes proved"))
    except (BoundError, ExprError, ModelFileError) as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0]) from None
    finally:
        bar.close()
    del model
    out = save_certificate(args, cert) if args.out else None
    if args.json:
        print(json.dumps({k: cert[k] for k in ("verdict", "d", "eps", "target", "max_bound", "counterexample",
                                               "seconds", "boxes_evaluated")}
                         | {"boxes": len(cert["boxes"]), "undecided_boxes": len(cert["undecided_boxes"])}, indent=2))
    else:
        mb = "-" if res.max_bound is None else decimal_up(res.max_bound, 8)
        print(f"symbounds certify: sup over [0,1]^{cert['d']} of |T(x) - g(x)| <= {eps}  "
              f"(model {args.model}, target {args.target})")
        print(f"  boxes: {len(res.boxes)} proved ({res.evaluated} evaluated), {len(res.undecided)} undecided")
        print(f"  largest certified error bound: {mb}")
        if res.counterexample:
            print(f"  counterexample: x = ({', '.join(res.counterexample['x'])}), "
                  f"|T - g| = {res.counterexample['error']}")
        print(f"  time: {res.seconds:.1f} s" + (f"; certificate written to {out}" if out else ""))
        print(f"verdict: {res.verdict}")
    return {"proved": 0, "refuted": 1, "undecided": 3}[res.verdict]


def _certify_spec(args, prec: int) -> int:
    from ..core.vnnlib import SpecError, parse_vnnlib, read_vnnlib_text, verify

    model = _load(args.model)  # a model file of either format, or an ONNX graph
    timeout = timeout_seconds(getattr(args, "timeout", None))
    check_out_folders(args.out)
    bar = Bar(args, "box")
    try:
        text = read_vnnlib_text(args.spec)
        spec = parse_vnnlib(text)
        res = verify(model, spec, prec=prec, max_boxes=args.max_boxes, timeout=timeout,
                     progress=lambda f, n: bar.volume(f, n, "the property's input box"))
    except (SpecError, BoundError) as e:
        message = str(e)  # an unreadable file's error already starts with its path
        raise UsageError(message if message.startswith(f"{args.spec}: ") else f"{args.spec}: {message}") from None
    finally:
        bar.close()
    pct = f"{float(res.proved_fraction) * 100:.1f}".rstrip("0").rstrip(".")
    if args.out is not None:
        if res.verdict == "proved":
            from ..core.property_certificate import make_property_certificate
            from ..core.version import __version__

            write_certificate(args.out, make_property_certificate(
                version=__version__, model=model, spec_text=text, result=res, prec=prec,
                source={"network": os.path.basename(args.model), "property": os.path.basename(args.spec)}))
            written(args.out)
        else:
            print(f"symbounds: {args.out}: not written (a certificate is written for a proved property only)",
                  file=sys.stderr)
    if args.json:
        print(json.dumps({"verdict": res.verdict, "counterexample": res.counterexample, "boxes": res.boxes,
                          "undecided_boxes": len(res.undecided), "seconds": round(res.seconds, 3),
                          "method": sorted(res.methods), "stopped": res.stopped,
                          "proved_fraction": str(res.proved_fraction)}, indent=2))
    else:
        print(f"symbounds certify: {args.model} against {args.spec} ({len(spec.unsafe)} unsafe alternative(s))")
        print(f"  sub-boxes evaluated: {res.boxes}, undecided: {len(res.undecided)}")
        if res.counterexample:
            ce = res.counterexample
            how = "exact rationals" if ce["checked"] == "exact" else "balls"
            print(f"  counterexample: X = ({', '.join(ce['x'])}) reaches alternative {ce['disjunct']}: "
                  f"Y = ({', '.join(ce['y'])}) (checked in {how})")
        if res.stopped is not None:
            print(f"  stopped by {STOPPED[res.stopped]}: safe on {pct}% of the input box's volume so far")
        print(f"  time: {res.seconds:.2f} s")
        print(f"verdict: {res.verdict}" + (" (timeout)" if res.stopped == "timeout" else ""))
    return res.verdict.exit_code


def _export(args) -> int:
    from ..core.onnx_export import export_onnx
    from ..core.onnx_io import OnnxError

    model = _load(args.model)
    check_out_folders(args.onnx)
    try:
        export_onnx(model, args.onnx, args.dtype)
    except OnnxError as e:
        raise UsageError(str(e)) from None
    written(args.onnx)
    return 0


def _import(args) -> int:
    from ..core.graph import Graph
    from ..core.graph_file import export_graph
    from ..core.modelfile import export_model
    from ..core.onnx_graph import import_onnx_network
    from ..core.onnx_io import OnnxError

    check_out_folders(args.out)
    try:
        model = import_onnx_network(args.onnx)
    except OnnxError as e:
        raise UsageError(str(e)) from None
    if isinstance(model, Graph):
        export_graph(model, args.out)
        written(args.out)
        print(f"symbounds import: {args.onnx}: a layer graph (symbounds-graph/1) of {len(model.nodes)} nodes, "
              f"input [{model.tokens}, {model.in_width}], output [{model.out_tokens}, {model.out_width}]")
        return 0
    export_model(model, args.out)
    written(args.out)
    print(f"symbounds import: {args.onnx}: {len(model.layers)} layers, {model.input} input")
    return 0


MODEL_COMMANDS = {"bound": _bound, "export": _export, "import": _import}
