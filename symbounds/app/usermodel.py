"""Commands for a user's own network: ``bound``, ``certify --model/--spec``, ``export``, ``import``.

Exit codes as for every command: 0 proved (or done), 1 refuted, 2 bad input, 3 undecided.
"""

from __future__ import annotations

import json
import sys

from ..core.bound import BoundError, BoundUndecided, bound, certify
from ..core.boxes import CertifyOptions
from ..core.certificate import write_certificate
from ..core.exact import decimal_down, decimal_up
from ..core.expr import ExprError
from ..core.modelfile import ModelFileError, load_model
from .args import Bar, UsageError, check_out_folders, number, precision, written

__all__ = ["MODEL_COMMANDS", "add_bound_arguments", "add_export_arguments", "add_import_arguments", "add_model_certify_arguments", "run_model_certify",
           "parse_box"]


def add_bound_arguments(b) -> None:
    """The flags of ``symbounds bound`` (its parser is made by the command line)."""
    b.description = ("A certified enclosure of a model file's output over an input box: the box is cut (--split, "
                     "--width), the network evaluated on each sub-box with first-order Taylor models (interval "
                     "balls where they fail), and the union printed with its lower end rounded down and its "
                     "upper end rounded up.  Exit 0, 2 bad input, 3 undecided.")
    b.epilog = ("examples:\n"
                "  symbounds bound net.json --box 0:1 --split 6\n"
                "  symbounds bound net.json --box=-1:1,0:1/2 --width 1/16 --json")
    b.add_argument("model", metavar="MODEL.json", help="a model file (symbounds-transformer/1)")
    b.add_argument("--box", required=True, metavar="LO:HI[,LO:HI...]",
                   help="one interval per input; token-set models: D*n intervals, token by token "
                        "(interval j*D + r bounds feature r of token j); write --box=-1:1 for a "
                        "negative first end")
    g = b.add_mutually_exclusive_group()
    g.add_argument("--split", type=int, default=0, metavar="DEPTH",
                   help="bisect the widest side DEPTH times (2^DEPTH sub-boxes; default 0)")
    g.add_argument("--width", default=None, metavar="W", help="bisect until every side is at most W")
    b.add_argument("--prec", type=int, default=128, help="precision in bits (default 128)")
    b.add_argument("--json", action="store_true", help="print one JSON object")


def add_export_arguments(e) -> None:
    """The flags of ``symbounds export``."""
    e.description = ("Write a model file (symbounds-transformer/1) as a float64 ONNX graph that onnxruntime runs "
                     "(tokens as rows, X = Z^T).  Needs the extra symbounds[onnx].")
    e.epilog = "example:\n  symbounds pou --export net.json && symbounds export net.json --onnx net.onnx"
    e.add_argument("model", metavar="MODEL.json")
    e.add_argument("--onnx", required=True, metavar="OUT.onnx", help="the ONNX file to write")


def add_import_arguments(i) -> None:
    """The flags of ``symbounds import``."""
    i.description = ("Read an ONNX graph into a model file, every float weight taken as its exact binary "
                     "rational (the operations supported are listed in the README, 'Your own network'); an "
                     "unsupported node is refused with one line naming it (exit 2).  Needs symbounds[onnx].")
    i.epilog = "example:\n  symbounds import net.onnx --out net.json && symbounds bound net.json --box 0:1"
    i.add_argument("onnx", metavar="IN.onnx")
    i.add_argument("--out", required=True, metavar="MODEL.json", help="the model file to write")


def add_model_certify_arguments(c) -> None:
    c.add_argument("--model", default=None, metavar="MODEL.json",
                   help="certify a model file instead of a construction (with --target and --eps, or --spec)")
    c.add_argument("--spec", default=None, metavar="PROP.vnnlib",
                   help="with --model: prove that no input of the property's box reaches its unsafe outputs")


def parse_box(text: str) -> tuple[list, list]:
    lo, hi = [], []
    for k, part in enumerate(text.split(",")):
        ends = part.split(":")
        if len(ends) != 2 or not ends[0].strip() or not ends[1].strip():
            raise UsageError(f"--box: interval {k} {part[:40]!r} is not LO:HI")
        a, b = number(ends[0], f"--box interval {k}"), number(ends[1], f"--box interval {k}")
        if a > b:
            raise UsageError(f"--box: interval {k} has LO > HI ({part[:40]})")
        lo.append(a)
        hi.append(b)
    return lo, hi


def _prec(p: int) -> int:
    return precision(p)


def _load(path: str):
    try:
        return load_model(path)
    except ModelFileError as e:
        raise UsageError(str(e)) from None


def _bound(args) -> int:
    model = _load(args.model)
    lo, hi = parse_box(args.box)
    width = None
    if args.width is not None:
        width = number(args.width, "--width")
        if width <= 0:
            raise UsageError("--width must be positive")
    if not (0 <= args.split <= 16):
        raise UsageError(f"--split {args.split}: use 0..16")
    try:
        res = bound(model, lo, hi, split=args.split, width=width, prec=_prec(args.prec))
    except BoundError as e:
        raise UsageError(str(e)) from None
    except BoundUndecided as e:
        print(f"symbounds: undecided: {e}", file=sys.stderr)  # stdout stays empty (no JSON to parse)
        return 3
    scalar = not isinstance(res.lower, tuple)
    los = [res.lower] if scalar else list(res.lower)
    his = [res.upper] if scalar else list(res.upper)
    if args.json:
        out = {"lower": decimal_down(los[0], 30) if scalar else [decimal_down(v, 30) for v in los],
               "upper": decimal_up(his[0], 30) if scalar else [decimal_up(v, 30) for v in his],
               "lower_exact": str(los[0]) if scalar else [str(v) for v in los],
               "upper_exact": str(his[0]) if scalar else [str(v) for v in his],
               "boxes": res.boxes, "seconds": round(res.seconds, 3), "method": res.method}
        if res.shape is not None:
            out["shape"] = list(res.shape)
        print(json.dumps(out, indent=2))
        return 0
    how = {"taylor": "first-order Taylor models", "ball": "interval balls",
           "taylor+ball": "Taylor models, interval balls where they failed"}[res.method]
    print(f"symbounds bound: {args.model} over {len(lo)} input interval(s), {res.boxes} sub-box(es), {how}")
    if scalar:
        print(f"  output in [{decimal_down(los[0])}, {decimal_up(his[0])}]")
    else:
        D = res.shape[0]
        for k, (a, b) in enumerate(zip(los, his)):
            print(f"  Z[{k % D}, {k // D}] in [{decimal_down(a)}, {decimal_up(b)}]")
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
    if args.spec is not None:
        if args.target is not None or args.eps is not None or args.out is not None:
            raise UsageError("--spec replaces --target, --eps and --out")
        return _certify_spec(args, prec)
    if args.target is None or args.eps is None:
        raise UsageError("--model needs --target EXPR and --eps E (or --spec PROP.vnnlib)")
    eps = number(args.eps, "--eps")
    if not (0 < eps < 1):
        raise UsageError("--eps must lie in (0, 1)")
    if not (1 <= args.workers <= 256):
        raise UsageError(f"--workers {args.workers}: use between 1 and 256")
    if not (1 <= args.max_boxes <= 10**8):
        raise UsageError(f"--max-boxes {args.max_boxes}: use between 1 and 10^8")
    model = _load(args.model)  # every malformed part reported before any work
    check_out_folders(args.out)
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
    if args.out:
        write_certificate(args.out, cert)
        written(args.out)
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
        print(f"  time: {res.seconds:.1f} s" + (f"; certificate written to {args.out}" if args.out else ""))
        print(f"verdict: {res.verdict}")
    return {"proved": 0, "refuted": 1, "undecided": 3}[res.verdict]


def _certify_spec(args, prec: int) -> int:
    from ..core.vnnlib import SpecError, load_vnnlib, verify

    model = _load(args.model)
    try:
        spec = load_vnnlib(args.spec)
        res = verify(model, spec, prec=prec, max_boxes=args.max_boxes)
    except (SpecError, BoundError) as e:
        message = str(e)  # an unreadable file's error already starts with its path
        raise UsageError(message if message.startswith(f"{args.spec}: ") else f"{args.spec}: {message}") from None
    if args.json:
        print(json.dumps({"verdict": res.verdict, "counterexample": res.counterexample, "boxes": res.boxes,
                          "undecided_boxes": len(res.undecided), "seconds": round(res.seconds, 3),
                          "method": sorted(res.methods)}, indent=2))
    else:
        print(f"symbounds certify: {args.model} against {args.spec} ({len(spec.unsafe)} unsafe alternative(s))")
        print(f"  sub-boxes evaluated: {res.boxes}, undecided: {len(res.undecided)}")
        if res.counterexample:
            ce = res.counterexample
            print(f"  counterexample: X = ({', '.join(ce['x'])}) reaches alternative {ce['disjunct']}: "
                  f"Y = ({', '.join(ce['y'])})")
        print(f"  time: {res.seconds:.2f} s")
        print(f"verdict: {res.verdict}")
    return {"proved": 0, "refuted": 1, "undecided": 3}[res.verdict]


def _export(args) -> int:
    from ..core.onnx_export import export_onnx
    from ..core.onnx_io import OnnxError

    model = _load(args.model)
    check_out_folders(args.onnx)
    try:
        export_onnx(model, args.onnx)
    except OnnxError as e:
        raise UsageError(str(e)) from None
    written(args.onnx)
    return 0


def _import(args) -> int:
    from ..core.modelfile import export_model
    from ..core.onnx_io import OnnxError, import_onnx

    check_out_folders(args.out)
    try:
        model = import_onnx(args.onnx)
    except OnnxError as e:
        raise UsageError(str(e)) from None
    export_model(model, args.out)
    written(args.out)
    print(f"symbounds import: {args.onnx}: {len(model.layers)} layers, {model.input} input")
    return 0


MODEL_COMMANDS = {"bound": _bound, "export": _export, "import": _import}
