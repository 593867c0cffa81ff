"""The ``symbounds`` command.

Exit codes: 0 every claim proved; 1 some claim refuted; 2 bad input; 3 some claim undecided;
4 an internal error (a bug: reported in one line; SYMBOUNDS_DEBUG=1 shows the traceback).
Bad input gives one line naming the problem, never a traceback; files are written atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from fractions import Fraction

# Each command imports the modules it needs (SymPy, python-flint, NumPy, matplotlib, the constructions)
# when it runs, and a command's flags are added only when that command is parsed (_LazyParser): so
# ``symbounds --version`` and ``symbounds --help`` start in a fraction of a second
# (benchmarks/bench_startup.py).
from ..core.version import __version__
from .args import (
    MAX_PREC,
    Bar,
    Parser,
    UsageError,
    add_digits_argument,
    add_instance_args,
    check_out_folders,
    digits,
    instance,
    kernel_verdict,
    int_list,
    number,
    number_list,
    point,
    precision,
    random_interp_dataset,
    written,
)

__all__ = ["main"]

class _LazyParser(Parser):
    """A sub-command's parser whose flags are added when it is first used (parsed, or its help shown),
    so that the modules defining them are imported only for the command that runs."""

    def __init__(self, *args, populate=None, **kwargs):
        super().__init__(*args, **kwargs)
        self._populate = populate

    def _ready(self):
        if self._populate is not None:
            populate, self._populate = self._populate, None
            populate(self)

    def parse_known_args(self, args=None, namespace=None):
        self._ready()
        return super().parse_known_args(args, namespace)

    def format_help(self):
        self._ready()
        return super().format_help()

    def format_usage(self):
        self._ready()
        return super().format_usage()


def _pou_arguments(q) -> None:
    add_instance_args(q)
    q.add_argument("--manifold", default=None, choices=["circle", "sphere", "torus", "curve"],
                   help="inputs on an exactly embedded manifold instead of the cube (docs/shi_liao.md, Manifolds)")
    q.add_argument("--ambient", type=int, default=None,
                   help="ambient dimension of the manifold (default: circle 2, sphere 3, torus 4, curve 10)")
    q.add_argument("--radius", default=None, help="radius of the manifold (default by manifold)")
    q.add_argument("--context", default="ball", choices=["ball", "mp", "fp", "all"],
                   help="set mpmath and/or float64 beside the certified (ball) values")
    q.add_argument("--prec", type=int, default=128, help="starting precision in bits (default 128)")
    q.add_argument("--max-prec", type=int, default=8192, help="largest precision tried (default 8192)")
    q.add_argument("--points", type=int, default=8, help="seeded random sample points on top of the grid (default 8)")
    q.add_argument("--grid", type=int, default=None, help="grid sample points per axis (default by dimension)")
    q.add_argument("--seed", type=int, default=0, help="seed of the random sample points")
    q.add_argument("--at", action="append", default=[], metavar="X",
                   help="evaluate T(x) and g(x) at X (comma-separated coordinates); repeatable")
    q.add_argument("--json", action="store_true", help="print one JSON object")
    q.add_argument("--out", default=None, help="write the report (text, or JSON with --json) to FILE")
    q.add_argument("--export", default=None, metavar="MODEL.json", help="write the model file")
    q.add_argument("--quiet", action="store_true", help="no progress bar")
    add_digits_argument(q)


def _interp_arguments(r) -> None:
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", default=None, metavar="FILE.json", help="dataset file (exact numbers)")
    src.add_argument("--random", default=None, metavar="N,n,d,m",
                     help="seeded random dataset: N sequences of up to n tokens in R^d, up to m targets each")
    r.add_argument("--seed", type=int, default=0, help="seed of the random dataset and construction (default 0)")
    r.add_argument("--attention", default="hardmax", choices=["hardmax", "softmax"],
                   help="hardmax (proved in exact rationals) or softmax (Arb balls + exact)")
    r.add_argument("--tau", default=None, help="softmax temperature (default 1/64)")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--export", default=None, metavar="MODEL.json", help="write the model file")
    r.add_argument("--out", default=None, help="write the report (text, or JSON with --json) to FILE")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    add_digits_argument(r)


def _certify_arguments(c) -> None:
    from .usermodel import add_model_certify_arguments

    add_instance_args(c)
    c.add_argument("--prec", type=int, default=128, help="precision of the box evaluations in bits (default 128)")
    c.add_argument("--workers", type=int, default=1, help="local worker processes (default 1)")
    c.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a Dask scheduler address (tcp://host:port) to spread boxes over (extra: dask)")
    c.add_argument("--max-boxes", type=int, default=None,
                   help="give up (undecided) after this many boxes (default: scaled to the instance, "
                        "max(200000, 8 d P^1.5); with --model 200000)")
    c.add_argument("--bisect", choices=["widest", "gradient"], default="widest",
                   help="halve a box along its widest side, or along the input that widens its bound most")
    c.add_argument("--arb-only", action="store_true",
                   help="evaluate every box in Arb balls (default: outward-rounded float64 first, Arb where it fails)")
    c.add_argument("--holder-class", action="store_true",
                   help="prove the bound for every target of the Hoelder class (alpha, C_H, B) instead of one --target")
    c.add_argument("--out", default=None, metavar="CERT.json", help="write the certificate")
    c.add_argument("--json", action="store_true", help="print a JSON summary")
    c.add_argument("--quiet", action="store_true", help="no progress bar")
    add_model_certify_arguments(c)


def _check_arguments(k) -> None:
    k.add_argument("certificate", metavar="CERT.json")
    k.add_argument("--workers", type=int, default=1,
                   help="processes of the independent kernel's box checks (default 1)")
    k.add_argument("--quiet", action="store_true", help="no progress bar")


def _sweep_arguments(s) -> None:
    s.add_argument("--eps", default="0.2,0.1", help="comma-separated accuracies (default 0.2,0.1)")
    s.add_argument("--d", default="1", help="comma-separated dimensions (default 1)")
    s.add_argument("--target", action="append", default=[], metavar="EXPR",
                   help="a target (repeatable); each is used for the dimensions whose variables it fits")
    s.add_argument("--alpha", default="1", help="Hoelder exponent in (0, 1] (default 1)")
    s.add_argument("--holder", default="2", help="Hoelder constant C_H (default 2)")
    s.add_argument("--bound", default="2", help="sup-norm bound B (default 2)")
    s.add_argument("--points", type=int, default=8, help="random sample points per instance (default 8)")
    s.add_argument("--certify", action="store_true", help="also certify each instance over the whole cube")
    s.add_argument("--workers", type=int, default=1, help="instances run in parallel processes (default 1)")
    s.add_argument("--out", required=True, metavar="TABLE.csv", help="write TABLE.csv and TABLE.json")
    s.add_argument("--quiet", action="store_true", help="no progress bar")


def _module_arguments(module: str, function: str):
    """Flags added by ``function`` of the app module ``module``, imported when the command is parsed."""
    def populate(parser):
        import importlib

        getattr(importlib.import_module(f"{__package__}.{module}"), function)(parser)
    return populate


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="symbounds", description="Constructive Transformer proofs, checked in rigorous arithmetic.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_LazyParser)
    sub.add_parser("pou", help="certify Shi & Liao's softmax partition-of-unity Transformer at an instance",
                   populate=_pou_arguments)
    sub.add_parser("interp", help="build and prove Alcalde-Fantuzzi-Zuazua's exact sequence interpolation",
                   populate=_interp_arguments)
    sub.add_parser(
        "certify", help="prove sup |T - g| <= eps over the whole cube, box by box",
        description="Prove sup over [0,1]^d of |T(x) - g(x)| <= eps for every x, not at sample points: the cube is "
                    "cut into boxes, the network enclosed on each box with first-order Taylor models, a box "
                    "whose bound exceeds eps bisected.  The construction of [SL26] at an instance (the flags of "
                    "pou), or a model file (--model, with --target and --eps, or a VNN-LIB property --spec).  "
                    "Exit 0 proved, 1 refuted (a counterexample), 2 bad input, 3 undecided.",
        epilog="examples:\n"
               "  symbounds certify --out cert.json                  # the default instance, 32 boxes\n"
               "  symbounds certify --eps 1/25 --workers 2\n"
               "  symbounds certify --model net.json --target 'sin(2*x1)' --eps 1/2 --out cert.json\n"
               "  symbounds certify --model net.json --spec prop.vnnlib\n"
               "  symbounds certify --model net.onnx --spec prop.vnnlib --timeout 60 --result out.txt",
        populate=_certify_arguments)
    sub.add_parser(
        "check", help="re-verify a certificate written by symbounds certify",
        description="Re-verify a certificate from scratch: rebuild the network from the instance (or read the "
                    "embedded model) and compare its SHA-256, check exactly that the boxes cover the cube, "
                    "re-evaluate every box and re-run the grid checks.  Exit 0 valid, 1 rejected (one line "
                    "naming the first problem), 2 not a certificate.",
        epilog="example:\n  symbounds certify --out cert.json && symbounds check cert.json",
        populate=_check_arguments)
    sub.add_parser("tighten", help="the smallest M, M_g or grid with which the network still certifies (proof, domain)",
                   populate=add_tighten_arguments)
    sub.add_parser("rate", help="the generalisation bound of [SL26]: eps(n), P, parameters, covering number, risk",
                   populate=_rate_arguments)
    sub.add_parser("sweep", help="a grid of instances (eps x d x targets) as one CSV/JSON table",
                   populate=_sweep_arguments)
    sub.add_parser("bound", help="a certified enclosure of a model file's output over an input box",
                   populate=_module_arguments("usermodel", "add_bound_arguments"))
    sub.add_parser("export", help="write a model file as an ONNX graph (float64; extra: onnx)",
                   populate=_module_arguments("usermodel", "add_export_arguments"))
    sub.add_parser("import", help="read an ONNX graph into a model file, weights as exact binary rationals",
                   populate=_module_arguments("usermodel", "add_import_arguments"))
    sub.add_parser("vnncomp", help="run a VNN-COMP benchmark folder (instances.csv): one result file per instance",
                   populate=_vnncomp_arguments)
    sub.add_parser(
        "prove", help="any construction of the catalogue by name: symbounds prove --list; symbounds prove KEY N=V ...",
        description="Prove one instance of any construction of the catalogue through its common interface: "
                    "its parameters by name (NAME=VALUE; --list shows them and their defaults), the proof, "
                    "and every declared claim with its verdict.  Exit 0 every claim proved, 1 some refuted, "
                    "2 bad input, 3 some undecided.",
        epilog="examples:\n"
               "  symbounds prove --list\n"
               "  symbounds prove alcalde N=3 n=5 d=2 m=2\n"
               "  symbounds prove shi_liao --example 1 --json",
        populate=_module_arguments("catalogue_cli", "add_prove_arguments"))
    sub.add_parser(
        "chain", help="[SL26]'s epsilon budget and size bounds for every parameter: proved, refuted or open per region",
        description="Each claim of the epsilon budget (E0-E3) and the size bounds (L8.1, L8.2) of [SL26] decided "
                    "for all parameters eps in (0,1), alpha in (0,1], C_H > 0, B > 0, integer d >= 1 "
                    "(docs/shi_liao.md, The constant chain for every parameter).  Exit 0 every claim proved, "
                    "1 some refuted (at a certified parameter point), 3 some open.",
        populate=_chain_arguments)
    sub.add_parser("latex", help="LaTeX: constants and lemma chain (pou), sizes and stages (interp), or the tables",
                   populate=_module_arguments("latex", "add_latex_arguments"))
    sub.add_parser("plot", help="draw a sweep table (error, size against eps) or the leakage against M, to PNG, SVG or PDF",
                   populate=_module_arguments("plot", "add_plot_arguments"))
    sub.add_parser("tikhonov", help="[AFZ25] regularised training (PyTorch, extra 'train') beside its certified threshold",
                   populate=_module_arguments("tikhonov_cli", "add_tikhonov_arguments"))
    return p


def _vnncomp_arguments(v) -> None:
    from .vnncomp_cli import add_vnncomp_arguments

    add_vnncomp_arguments(v)


def _vnncomp(args) -> int:
    from .vnncomp_cli import run_vnncomp

    return run_vnncomp(args)


def _rate_arguments(p) -> None:
    from ..papers.shi_liao.rate import add_rate_arguments

    add_rate_arguments(p)


def _latex(args) -> int:
    from .latex import run_latex

    try:
        if args.what == "class":  # the theorem for every target of the Hoelder class
            from .class_latex import run_latex_class

            return run_latex_class(args)
        return run_latex(args)
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0]) from None


def _plot(args) -> int:
    from .plot import run_plot

    try:
        return run_plot(args)
    except ValueError as e:
        raise UsageError(str(e).splitlines()[0]) from None


def _tikhonov(args) -> int:
    from .tikhonov_cli import run_tikhonov

    return run_tikhonov(args)


def _rate(args) -> int:
    from ..papers.shi_liao.rate import run_rate

    try:
        return run_rate(args)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _certify(args) -> int:
    from ..core.boxes import CertifyOptions
    from ..core.certificate import MIN_CERT_PREC
    from ..core.exact import decimal_up
    from ..papers.shi_liao.certificate import certify_instance
    from .usermodel import STOPPED, check_certificate_out, run_model_certify, save_certificate, timeout_seconds

    if args.model is not None or args.spec is not None:
        if args.max_boxes is None:
            from ..core.boxes import DEFAULT_MAX_BOXES

            args.max_boxes = DEFAULT_MAX_BOXES
        return run_model_certify(args)
    if args.holder_class:
        from .class_cli import run_class_certify

        return run_class_certify(args)
    timeout = timeout_seconds(args.timeout)
    inst = instance(args)
    precision(args.prec, lo=MIN_CERT_PREC, why=f"below {MIN_CERT_PREC} bits the enclosures of the softmax weights "
              "are too wide to decide any box")
    if not (1 <= args.workers <= 256):
        raise UsageError(f"--workers {args.workers}: use between 1 and 256")
    if args.max_boxes is not None and not (1 <= args.max_boxes <= 10**8):
        raise UsageError(f"--max-boxes {args.max_boxes}: use between 1 and 10^8")
    check_certificate_out(args)
    bar = Bar(args, "box")
    try:
        cert, res = certify_instance(
            inst, CertifyOptions(prec=args.prec, workers=args.workers, scheduler=args.scheduler,
                                 max_boxes=args.max_boxes, fast=not args.arb_only, split=args.bisect,
                                 timeout=timeout),
            lambda f, n: bar.volume(f, n, estimate=True))
    except ValueError as e:
        raise UsageError(str(e)) from None
    finally:
        bar.close()
    out = save_certificate(args, cert) if args.out else None
    summary = {k: cert[k] for k in ("verdict", "d", "eps", "target", "max_bound", "counterexample", "seconds",
                                    "boxes_evaluated")}
    summary["boxes"] = len(cert["boxes"])
    summary["undecided_boxes"] = len(cert["undecided_boxes"])
    summary["assumptions"] = {a["id"]: a["verdict"] for a in cert["assumptions"]}
    summary["stopped"] = res.stopped
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        mb = "-" if res.max_bound is None else decimal_up(res.max_bound, 6)
        print(f"symbounds certify: sup over [0,1]^{inst.d} of |T(x) - g(x)| <= {inst.eps}  (target {inst.target_text})")
        print(f"  boxes: {len(res.boxes)} proved ({res.evaluated} evaluated), {len(res.undecided)} undecided")
        print(f"  largest certified error bound: {mb}")
        print("  assumptions on g (grid): " + ", ".join(f"{a['id']} {a['verdict']}" for a in cert["assumptions"]))
        if res.counterexample:
            print(f"  counterexample: x = ({', '.join(res.counterexample['x'])}), |T - g| = {res.counterexample['error']}")
        print(f"  time: {res.seconds:.1f} s" + (f"; certificate written to {out}" if out else ""))
        if res.stopped:
            print(f"  stopped by {STOPPED.get(res.stopped, res.stopped)}, {len(res.boxes)} boxes proved so far")
        grid = [a["id"] for a in cert["assumptions"] if a["verdict"] == "evidence"]
        why = f" (assumptions {', '.join(grid)} on g: grid evidence only)" if res.verdict == "proved" and grid else ""
        print(f"verdict: {res.verdict}{why}")
    return {"proved": 0, "refuted": 1, "undecided": 3}[res.verdict]


def _check(args) -> int:
    """The full re-verification, then the independent kernel (docs/checking.md); 0 if both accept.
    A class certificate ([SL26], every target of the Hoelder class) has its own check."""
    from .class_cli import is_class_certificate, run_class_check
    from .vnncomp_cli import is_property_certificate, run_property_check

    if not (1 <= args.workers <= 256):
        raise UsageError(f"--workers {args.workers}: use between 1 and 256")
    prop = is_property_certificate(args.certificate)
    if prop is not None:
        return run_property_check(args, prop)
    from .graph_target_cli import is_graph_target_certificate, run_graph_target_check

    graph_target = is_graph_target_certificate(args.certificate)
    if graph_target is not None:
        return run_graph_target_check(args, graph_target)
    whole_class = is_class_certificate(args.certificate)
    if whole_class is not None:
        return run_class_check(args, whole_class)
    from ..core.certificate import CertificateError, NotACertificate, load_certificate
    from ..core.exact import decimal_up
    from ..papers import check_certificate

    try:
        cert = load_certificate(args.certificate)
    except CertificateError as e:
        raise UsageError(str(e)) from None
    bar = Bar(args, "box")
    full = 0
    try:
        info = check_certificate(cert, progress=lambda done, total: bar(done, total, "boxes re-checked"))
    except NotACertificate as e:
        raise UsageError(f"{args.certificate}: {e}") from None
    except CertificateError as e:
        print(f"symbounds: certificate rejected: {e}", file=sys.stderr)
        full = 1
    finally:
        bar.close()
    if not full:
        print(f"certificate valid: {info['boxes']} boxes cover [0,1]^{info['d']}, every box re-evaluated, "
              f"sup |T - g| <= {decimal_up(Fraction(info['max_bound']), 6)} <= eps = {info['eps']}")
    return kernel_verdict(args, full, "boxes")


def _sweep(args) -> int:
    from ..core.expr import ExprError, input_names
    from ..papers import shi_liao as sl
    from ..papers.shi_liao.sweep import json_twin, sweep, table_text, write_table

    eps_list = [str(e) for e in number_list(args.eps, "--eps")]
    d_list = int_list(args.d, "--d")
    if any(not (1 <= d <= 8) for d in d_list):
        raise UsageError("--d: dimensions must lie in 1..8")
    if not (1 <= args.workers <= 256):
        raise UsageError(f"--workers {args.workers}: use between 1 and 256")
    targets = {}
    for d in d_list:
        fitting = []
        for t in args.target:
            try:
                sl.Instance(d=d, target=t).target_expr()
                fitting.append(t)
            except ExprError:
                continue
        if args.target and not fitting:
            raise UsageError(f"--target: no given target is an expression in {input_names(d)}")
        targets[d] = fitting or None
    check_out_folders(args.out, json_twin(args.out))
    bar = Bar(args, "instance")
    try:
        rows = sweep(eps_list, d_list, targets, args.alpha, args.holder, args.bound, args.points, args.certify,
                     args.workers, lambda done, total: bar(done, total))
    except (ValueError, ExprError) as e:
        raise UsageError(str(e)) from None
    finally:
        bar.close()
    json_path = write_table(rows, args.out)
    print(table_text(rows))
    written(args.out)
    written(json_path)
    return 0


def _chain_arguments(c) -> None:
    c.add_argument("--json", action="store_true", help="print one JSON object (docs/schemas/chain.schema.json)")
    c.add_argument("--out", default=None, help="write the report (text, or JSON with --json) to FILE")


def _chain(args) -> int:
    from ..papers.shi_liao.parametric import chain, chain_json, chain_text

    check_out_folders(args.out)
    rows = chain()
    doc = chain_json(rows)
    _report(args, json.dumps(doc, indent=2) if args.json else chain_text(rows))
    return {"proved": 0, "refuted": 1, "open": 3}[doc["verdict"]]


def _report(args, text: str) -> None:
    """The report (text, or JSON with ``--json``) to ``--out FILE`` (named on stderr) or else to stdout:
    one place, never both (README, "What every command prints")."""
    from ..core.files import atomic_write

    if args.out:
        atomic_write(args.out, text + "\n")
        written(args.out)
    else:
        print(text)


def _emit(args, text: str, res, model_prec: int) -> int:
    """The end of a run: the model file (``--export``), the report (:func:`_report`), and the run's
    exit code."""
    from ..core.modelfile import ModelFileError, export_model

    if args.export:
        try:
            export_model(res.model, args.export, model_prec)
        except ModelFileError as e:
            _report(args, text)  # the run's result is still worth reading; then the one-line error
            raise UsageError(f"--export {args.export}: {e}") from None
        written(args.export)
    _report(args, text)
    return res.exit_code


def _pou(args) -> int:
    from ..papers.shi_liao.run import PouOptions
    from ..papers.shi_liao.run import run as pou_run
    from .report import pou_json, pou_text

    inst = instance(args)
    precision(args.prec)
    if not (args.prec <= args.max_prec <= MAX_PREC):
        raise UsageError(f"--max-prec {args.max_prec}: use between --prec and {MAX_PREC} bits")
    if not (0 <= args.points <= 100000):
        raise UsageError(f"--points {args.points}: use between 0 and 100000")
    if args.grid is not None and not (1 <= args.grid <= 1000):
        raise UsageError(f"--grid {args.grid}: use between 1 and 1000")
    if args.manifold is None:
        at = tuple(point(t, args.d) for t in args.at)
    else:
        try:
            at = tuple(inst.check_point(point(t, inst.man.ambient)) for t in args.at)
        except ValueError as e:
            raise UsageError(str(e)) from None
    check_out_folders(args.out, args.export)
    opts = PouOptions(context=args.context, prec=args.prec, max_prec=args.max_prec, points=args.points,
                      grid=args.grid, seed=args.seed, at=at)
    bar = Bar(args, "pt")
    try:
        try:
            res = pou_run(inst, opts, lambda done, total, prec: bar(done, total, f"{prec} bits"),
                          whole_progress=lambda f, n: bar.volume(f, n, "the manifold's parameter domain"))
        except ValueError as e:
            raise UsageError(str(e)) from None
    finally:
        bar.close()
    text = json.dumps(pou_json(res), indent=2) if args.json else pou_text(res, digits=digits(args))
    return _emit(args, text, res, res.prec)


def add_tighten_arguments(t) -> None:
    t.description = (
        "For each constant (M, M_g, the grid), the other constants derived, the smallest value with which every "
        "lemma and budget claim is still proved (proof) or sup |T - g| <= eps is still certified over the cube "
        "(domain): a certified pass, with the value one resolution step below refuted (a claim, or a "
        "counterexample point).  With --what tau (and --data or --random): the largest softmax temperature of "
        "the interpolation construction [AFZ25] at which claims X1 and I1 are proved, the step above refuted.  "
        "Exit 0 when every minimum has a refuted step below, 3 otherwise, 2 on bad input.")
    for flag, help_ in (("--d", "input dimension (default 1)"), ("--alpha", "Hoelder exponent in (0, 1] (default 1)"),
                        ("--holder", "Hoelder constant C_H > 0 (default 2)"), ("--bound", "sup-norm bound B > 0 (default 2)"),
                        ("--eps", "accuracy in (0, 1) (default 0.1)"),
                        ("--target", "target g as an expression in x1..xd (default: a 2-Lipschitz sine)")):
        t.add_argument(flag, type=int if flag == "--d" else str, default=None, help=help_)
    t.set_defaults(M=None, Mg=None)
    t.add_argument("--what", default="M,Mg",
                   help="comma-separated constants among M, Mg, grid (default M,Mg); or tau alone: the largest "
                        "temperature of the softmax interpolation [AFZ25] that still certifies (with --data or --random)")
    t.add_argument("--data", default=None, metavar="FILE.json", help="--what tau: dataset file (exact numbers)")
    t.add_argument("--random", default=None, metavar="N,n,d,m", help="--what tau: seeded random dataset")
    t.add_argument("--seed", type=int, default=None, help="--what tau: seed of the dataset and construction (default 0)")
    t.add_argument("--criterion", default=None, choices=["proof", "domain", "both", "class", "all"],
                   help="proof: every lemma and budget claim proved; domain: sup |T - g| <= eps certified over the "
                        "cube; both (default; the grid has the domain criterion only); class: the bound for every "
                        "target of the Hoelder class (docs/shi_liao.md); all: the three")
    t.add_argument("--class", dest="criterion", action="store_const", const="class",
                   help="the same as --criterion class")
    t.add_argument("--resolution", default="1/100", help="relative resolution R in (0, 1/2) (default 1/100)")
    t.add_argument("--scan", type=int, default=None, help="halvings below the derived value scanned first (default 10)")
    t.add_argument("--prec", type=int, default=None, help="ball precision in bits (default 128; tau: 256)")
    t.add_argument("--max-boxes", type=int, default=None, help="domain: boxes before a value is undecided (default 200000)")
    t.add_argument("--map", action="store_true",
                   help="also a grid of (M_g, M) pairs (with --what M,Mg --criterion domain)")
    t.add_argument("--map-steps", type=int, default=None,
                   help="--map: values per axis, from the derived value down to half the minimum, log-spaced (default 8)")
    t.add_argument("--json", action="store_true", help="print one JSON object")
    t.add_argument("--out", default=None, help="write the report (text, or JSON with --json) to FILE")
    t.add_argument("--quiet", action="store_true", help="no progress bar")


#: ``tighten`` flags of the partition-of-unity constants that have no meaning for ``--what tau``, and back.
_POU_ONLY = ("d", "alpha", "holder", "bound", "eps", "target", "criterion", "scan", "max_boxes", "map_steps")
_TAU_ONLY = ("data", "random", "seed")


def _tighten(args) -> int:
    from ..papers import shi_liao as sl
    from ..papers.shi_liao import tighten as tg
    from .report import tighten_json, tighten_text

    what = [w.strip() for w in args.what.split(",") if w.strip()]
    if not what:
        raise UsageError("--what: name at least one constant (M, Mg, grid) or tau")
    for w in what:
        if w not in tg.CONSTANTS + ("tau",):
            raise UsageError(f"--what: unknown constant {w[:40]!r} (use M, Mg, grid, or tau)")
    what = list(dict.fromkeys(what))
    if "tau" in what:
        return _tighten_tau(args, what)
    for k in _TAU_ONLY:
        if getattr(args, k) is not None:
            raise UsageError(f"--{k} applies to --what tau only (the interpolation construction)")
    args.criterion = args.criterion or "both"
    args.scan = 10 if args.scan is None else args.scan
    args.prec = 128 if args.prec is None else args.prec
    args.max_boxes = 200_000 if args.max_boxes is None else args.max_boxes
    args.map_steps = 8 if args.map_steps is None else args.map_steps
    criteria = {"both": ["proof", "domain"], "all": ["proof", "domain", "class"]}.get(args.criterion, [args.criterion])
    for w in what:
        if args.criterion not in ("both", "all") and args.criterion not in tg.CRITERIA[w]:
            raise UsageError(f"--criterion {args.criterion} has no meaning for {w}: the grid is fixed by the budget "
                             "claims E0/E1 (every coarser grid refutes them); use --criterion domain")
    R = number(args.resolution, "--resolution")
    if not (0 < R < Fraction(1, 2)):
        raise UsageError(f"--resolution {args.resolution}: must lie strictly between 0 and 1/2")
    if not (1 <= args.scan <= 40):
        raise UsageError(f"--scan {args.scan}: use between 1 and 40")
    precision(args.prec)
    if not (1 <= args.max_boxes <= 10**8):
        raise UsageError(f"--max-boxes {args.max_boxes}: use between 1 and 10^8")
    if args.map and (sorted(what) != ["M", "Mg"] or args.criterion != "domain"):
        raise UsageError("--map needs --what M,Mg --criterion domain")
    if not (1 <= args.map_steps <= 16):
        raise UsageError(f"--map-steps {args.map_steps}: use between 1 and 16")
    inst = instance(args)
    check_out_folders(args.out)
    opts = tg.TightenOptions(resolution=R, scan=args.scan, prec=args.prec, max_prec=max(args.prec, 2048),
                             max_boxes=args.max_boxes)
    bar = Bar(args, "eval")
    grid_map = None
    try:
        try:
            sl.constants(inst)  # a grid above the token limit is bad input, before any work
            results = tg.tighten_all(inst, what, criteria, opts, lambda done, total, label: bar(done, total, label))
            checks = tg.consistency(inst, results, opts)
            if args.map:
                lowest = {r.constant: r.minimum for r in results}
                Mg_v = tg.map_values(tg.paper_value(inst, "Mg")[0], lowest.get("Mg"), args.map_steps)
                M_v = tg.map_values(tg.paper_value(inst, "M")[0], lowest.get("M"), args.map_steps)
                cells = tg.tighten_map(inst, Mg_v, M_v, opts, lambda done, total, label: bar(done, total, label))
                grid_map = {"Mg_values": [tg.exact_text(v) for v in Mg_v], "M_values": [tg.exact_text(v) for v in M_v],
                            "cells": cells}
        except ValueError as e:
            raise UsageError(str(e).splitlines()[0]) from None
    finally:
        bar.close()
    if args.json:
        text = json.dumps(tighten_json(inst, results, checks, R, grid_map), indent=2)
    else:
        text = tighten_text(inst, results, checks, R, grid_map)
    _report(args, text)
    done = all(r.minimum is not None and r.below_outcome is not None and r.below_outcome.status == "fail"
               for r in results)
    return 0 if done else 3


def _tighten_tau(args, what) -> int:
    """``symbounds tighten --what tau``: the largest certified temperature of the softmax interpolation."""
    from ..papers.alcalde import tighten as tt
    from ..papers.alcalde.dataset import DatasetError, load_dataset
    from .report import tau_text

    if what != ["tau"]:
        raise UsageError("--what tau cannot be combined with M, Mg or grid (another construction)")
    for k in _POU_ONLY:
        if getattr(args, k) is not None:
            raise UsageError(f"--{k.replace('_', '-')} does not apply to --what tau (the interpolation construction)")
    if args.map:
        raise UsageError("--map does not apply to --what tau")
    if (args.data is None) == (args.random is None):
        raise UsageError("--what tau needs exactly one of --data FILE.json and --random N,n,d,m")
    R = number(args.resolution, "--resolution")
    if not (0 < R < Fraction(1, 2)):
        raise UsageError(f"--resolution {args.resolution}: must lie strictly between 0 and 1/2")
    prec = 256 if args.prec is None else args.prec
    precision(prec)
    seed = 0 if args.seed is None else args.seed
    check_out_folders(args.out)
    try:
        ds = load_dataset(args.data) if args.data is not None else random_interp_dataset(args.random, seed)
    except DatasetError as e:
        raise UsageError(str(e)) from None
    source = args.data if args.data is not None else f"--random {args.random} --seed {seed}"
    opts = tt.TauOptions(resolution=R, seed=seed, prec=prec, max_prec=max(prec, 4096))
    bar = Bar(args, "cert")
    try:
        res = tt.tighten_tau(ds, opts, lambda done, total, label: bar(done, total, label))
    finally:
        bar.close()
    text = json.dumps(tt.tau_json(ds, res, opts, source), indent=2) if args.json else tau_text(ds, res, opts, source)
    _report(args, text)
    return 0 if res.tight else 3


def _interp(args) -> int:
    from ..papers.alcalde.dataset import DatasetError, load_dataset
    from ..papers.alcalde.run import InterpOptions
    from ..papers.alcalde.run import run as interp_run
    from .report import interp_json, interp_text

    if args.tau is not None and args.attention != "softmax":
        raise UsageError("--tau applies to --attention softmax only")
    tau = number(args.tau, "--tau") if args.tau is not None else Fraction(1, 64)
    if tau <= 0:
        raise UsageError(f"--tau {args.tau}: must be positive")
    check_out_folders(args.out, args.export)
    try:
        if args.data is not None:
            ds = load_dataset(args.data)
        else:
            ds = random_interp_dataset(args.random, args.seed)
        bar = Bar(args, "step")
        try:
            res = interp_run(ds, InterpOptions(attention=args.attention, tau=tau, seed=args.seed), progress=bar.stage)
        finally:
            bar.close()
    except DatasetError as e:
        raise UsageError(str(e)) from None
    text = json.dumps(interp_json(res), indent=2) if args.json else interp_text(res, digits=digits(args))
    return _emit(args, text, res, 128)


#: Options whose value is an expression that may begin with "-" (``--target -x1^2``).
_EXPRESSION_OPTIONS = ("--target",)


def _join_expressions(argv: list[str]) -> list[str]:
    """``--target -x1^2`` -> ``--target=-x1^2``: argparse would take ``-x1^2`` for an option; the
    token after an expression option is always its value."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out.extend(argv[i:])
            break
        if a in _EXPRESSION_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _prove(args) -> int:
    from .catalogue_cli import run_prove

    return run_prove(args)


def _model_command(args) -> int:
    from .usermodel import MODEL_COMMANDS

    return MODEL_COMMANDS[args.command](args)


def main(argv=None) -> int:
    parser = build_parser()
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        args = parser.parse_args(_join_expressions(argv))
        if args.version:
            print(f"symbounds {__version__}")
            return 0
        if args.command is None:
            raise UsageError("missing command (try: symbounds pou)")
        commands = {"pou": _pou, "certify": _certify, "check": _check, "sweep": _sweep, "rate": _rate,
                    "interp": _interp, "latex": _latex, "plot": _plot, "tighten": _tighten, "prove": _prove,
                    "tikhonov": _tikhonov, "chain": _chain, "bound": _model_command, "export": _model_command,
                    "import": _model_command, "vnncomp": _vnncomp}
        code = commands[args.command](args)
        sys.stdout.flush()  # a reader that went away is seen here, not at the interpreter's exit
        return code
    except BrokenPipeError:  # stdout's reader closed early (symbounds rate | head): not an error of ours
        # the rest of the output has nowhere to go; point stdout at /dev/null so that the final
        # flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a process ended by a closed pipe
    except UsageError as e:
        print(f"symbounds: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("symbounds: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # a bug, not bad input: still one line, and a distinct exit code
        boxes = sys.modules.get("symbounds.core.boxes")  # imported by the command that raised it, if any
        if boxes is not None and isinstance(e, boxes.WorkersLost):
            # nothing was decided: undecided, and no certificate written
            print(f"symbounds: {e}", file=sys.stderr)
            return 3
        if os.environ.get("SYMBOUNDS_DEBUG"):
            raise
        print(f"symbounds: internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              "(set SYMBOUNDS_DEBUG=1 for the traceback)", file=sys.stderr)
        return 4


def entry() -> None:  # console script
    sys.exit(main())
