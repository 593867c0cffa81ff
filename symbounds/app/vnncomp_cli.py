"""The VNN-COMP workflow on the command line: ``certify --model X.onnx --spec Y.vnnlib --timeout T
--result OUT`` (one instance) and ``symbounds vnncomp INSTANCES.csv`` (a benchmark folder).

Each instance runs in a child process under a hard wall-clock limit (its timeout plus 5%, at
least a second): the search itself stops at the timeout, and a child still busy at the limit
(an evaluation that does not return) is ended and answered ``timeout``.  The parent writes the
result file and the certificate (atomically), so a child ended early never leaves a partial file.

Exit codes: 0 unsat, 1 sat, 2 bad input (or an instance that ended in ``error``), 3 timeout or
unknown; ``vnncomp`` exits 0 when every instance was answered (whatever the answers), 2 when
one ended in ``error``.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time

from ..core.files import atomic_write
from ..core.vnncomp import ANSWERS, VnncompError, answer_of, float_witness, load_network, onnxruntime_check
from ..core.vnncomp import read_instances, result_text
from .args import UsageError, check_out_folders, written

__all__ = ["add_vnncomp_arguments", "run_vnncomp", "certify_result", "solve_instance", "hard_limit",
           "is_property_certificate", "run_property_check"]

#: The child's wall-clock allowance beyond the timeout (the search stops at the timeout itself).
SLACK = 0.05


def hard_limit(timeout: float) -> float:
    return timeout * (1 + SLACK) if timeout >= 20 else timeout + max(0.0, min(1.0, timeout * SLACK))


def solve_instance(network: str, spec_path: str, timeout: float, prec: int = 128, max_boxes: int = 10**7,
                   started: float | None = None) -> dict:
    """One instance in this process: the record the result file and the summary are made of.
    ``started``: the ``time.monotonic()`` the instance's clock started at (default: now)."""
    from ..core.bound import BoundError
    from ..core.property_certificate import make_property_certificate
    from ..core.version import __version__
    from ..core.vnnlib import SpecError, parse_vnnlib, read_vnnlib_text, verify

    t0 = time.monotonic() if started is None else started
    rec = {"answer": "error", "message": None, "witness": None, "onnxruntime": None, "certificate": None,
           "boxes": 0, "stopped": None}
    try:
        model, onnx_bytes = load_network(network)
        text = read_vnnlib_text(spec_path)
        spec = parse_vnnlib(text)
        # the search stops at the timeout less what loading took and a margin for the answer's
        # re-check (witness, certificate) after it
        budget = max(0.05, timeout * (1 - SLACK / 2) - (time.monotonic() - t0))
        res = verify(model, spec, prec=prec, max_boxes=max_boxes, timeout=budget)
    except (VnncompError, SpecError, BoundError) as e:
        rec["message"] = str(e).splitlines()[0]
        rec["seconds"] = round(time.monotonic() - t0, 3)
        return rec
    rec["answer"] = answer_of(res.verdict, res.stopped)
    rec["boxes"], rec["stopped"] = res.boxes, res.stopped
    if rec["answer"] == "sat":
        w = float_witness(model, spec, res.counterexample, prec)
        rec["witness"] = w
        if onnx_bytes is not None:
            rec["onnxruntime"] = onnxruntime_check(onnx_bytes, spec, w["x"])
    elif rec["answer"] == "unsat":
        rec["certificate"] = make_property_certificate(
            version=__version__, model=model, spec_text=text, result=res, prec=prec,
            source={"network": os.path.basename(network), "property": os.path.basename(spec_path),
                    "network_sha256": _sha(network)})
    rec["seconds"] = round(time.monotonic() - t0, 3)
    return rec


def _sha(path: str) -> str:
    import hashlib

    from ..core.files import read_user_file

    return hashlib.sha256(read_user_file(path, VnncompError, 2**30)).hexdigest()


def _child(conn, args):
    try:
        conn.send(solve_instance(*args))
    except BaseException as e:  # a bug: reported as the instance's error, never a hang
        conn.send({"answer": "error", "message": f"internal error: {type(e).__name__}: {str(e)[:120]}",
                   "seconds": None})
    finally:
        conn.close()


def run_limited(network: str, spec_path: str, timeout: float, prec: int = 128, max_boxes: int = 10**7) -> dict:
    """:func:`solve_instance` in a child process, ended at :func:`hard_limit` (answer ``timeout``)."""
    from ..core import property_certificate, vnnlib  # noqa: F401  (imported once, before the fork)

    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    t0 = time.monotonic()
    p = ctx.Process(target=_child, args=(child, (network, spec_path, timeout, prec, max_boxes, t0)), daemon=True)
    p.start()
    child.close()
    limit = hard_limit(timeout)
    rec = None
    try:
        if parent.poll(max(0.0, limit - (time.monotonic() - t0))):
            try:
                rec = parent.recv()
            except EOFError:
                rec = None
    finally:
        if p.is_alive():
            p.kill()
        p.join()
        parent.close()
    seconds = round(time.monotonic() - t0, 3)
    if rec is None:
        if seconds >= limit * 0.99:
            return {"answer": "timeout", "message": "ended at the time limit", "seconds": seconds, "boxes": None,
                    "witness": None, "onnxruntime": None, "certificate": None, "stopped": "timeout"}
        return {"answer": "error", "message": f"the worker process ended without an answer (exit {p.exitcode})",
                "seconds": seconds, "boxes": None, "witness": None, "onnxruntime": None, "certificate": None,
                "stopped": None}
    rec["seconds"] = seconds
    return rec


def _cert_path(result_path: str) -> str:
    stem = result_path[:-4] if result_path.endswith(".txt") else result_path
    return stem + ".cert.json"


def _write_outputs(rec: dict, result_path: str, cert_path: str | None) -> list:
    """The result file (and the certificate of an ``unsat``); returns the paths written."""
    paths = []
    if rec["answer"] == "unsat" and rec.get("certificate") is not None and cert_path is not None:
        from ..core.certificate import write_certificate

        write_certificate(cert_path, rec["certificate"])
        paths.append(cert_path)
    atomic_write(result_path, result_text(rec["answer"], rec.get("witness")))
    paths.append(result_path)
    return paths


def _witness_line(rec: dict) -> str | None:
    w = rec.get("witness")
    if not w:
        return None
    how = "exact rationals" if w.get("checked") == "exact" else "Arb balls"
    where = "a float64 point" if w.get("float_point") else "an exact point (no float64 point of the box refutes)"
    line = f"witness at {where}, re-checked in {how}"
    o = rec.get("onnxruntime")
    if o is not None:
        line += ("; onnxruntime: " + ("confirms (its outputs lie in the unsafe region)" if o.get("unsafe")
                                      else "does NOT confirm (its float outputs miss the unsafe region)")
                 if o.get("available") else f"; onnxruntime not run: {o.get('reason')}")
    return line


# ------------------------------------------------------------------------------------------
# certify --result


def certify_result(args, prec: int, timeout: float | None) -> int:
    """``certify --model X --spec Y --timeout T --result OUT [--out CERT]`` (``timeout``: the
    parsed ``--timeout``)."""
    if timeout is None:
        raise UsageError("--result needs --timeout SECONDS (the competition's per-instance limit)")
    cert_path = args.out or _cert_path(args.result)
    check_out_folders(args.result, cert_path)
    for path, what in ((args.model, "--model"), (args.spec, "--spec")):
        if not os.path.isfile(path):
            atomic_write(args.result, result_text("error"))
            raise UsageError(f"{what} {path}: no such file")
    rec = run_limited(args.model, args.spec, timeout, prec, args.max_boxes)
    for p in _write_outputs(rec, args.result, cert_path):
        written(p)
    if rec["answer"] == "error":
        raise UsageError(rec["message"] or "error")
    if args.json:
        row = _summary_row(rec, args.model, args.spec, timeout, args.result,
                           cert_path if rec["answer"] == "unsat" else None)
        print(json.dumps(_summary(None, os.path.dirname(args.result) or ".", [row], rec["seconds"]), indent=2))
    else:
        print(f"symbounds certify: {args.model} against {args.spec}: {rec['answer']} ({rec['seconds']:.2f} s, "
              f"timeout {timeout:g} s)")
        line = _witness_line(rec)
        if line:
            print(f"  {line}")
    return {"unsat": 0, "sat": 1}.get(rec["answer"], 3)


# ------------------------------------------------------------------------------------------
# vnncomp INSTANCES.csv


def add_vnncomp_arguments(v) -> None:
    v.description = ("Run a VNN-COMP benchmark folder: every line 'onnx,vnnlib,timeout' of INSTANCES.csv (paths "
                     "relative to the csv's folder, .gz files read bounded) is answered unsat, sat, timeout, "
                     "unknown or error in the competition's result file, one per instance, with a "
                     "certificate beside each unsat (re-verified by symbounds check) and the witness of each "
                     "sat re-checked rigorously and under onnxruntime.  Exit 0 every instance answered, 2 bad "
                     "input or an instance in error.")
    v.epilog = ("examples:\n"
                "  symbounds vnncomp benchmarks/soundness/instances.csv --results out/\n"
                "  symbounds vnncomp instances.csv --results out/ --json > summary.json")
    v.add_argument("instances", metavar="INSTANCES.csv")
    v.add_argument("--results", default="vnncomp_results", metavar="DIR",
                   help="the folder of the result files and certificates (made if missing; default vnncomp_results)")
    v.add_argument("--prec", type=int, default=128, help="precision of the box evaluations in bits (default 128)")
    v.add_argument("--max-boxes", type=int, default=10**7, help="sub-boxes per instance at most (default 10^7)")
    v.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    v.add_argument("--quiet", action="store_true", help="no progress lines")


def _stem(path: str) -> str:
    name = os.path.basename(path)
    for suffix in (".gz", ".onnx", ".vnnlib", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]


def _summary_row(rec, network, spec, timeout, result_path, cert_path) -> dict:
    o = rec.get("onnxruntime")
    w = rec.get("witness")
    return {"network": network, "property": spec, "timeout": timeout, "answer": rec["answer"],
            "seconds": rec.get("seconds"), "boxes": rec.get("boxes"), "result": result_path,
            "certificate": cert_path, "message": rec.get("message"),
            "witness": None if not w else {"x": w["x"], "y": w["y_value"], "checked": w.get("checked"),
                                           "float_point": bool(w.get("float_point"))},
            "onnxruntime": None if o is None else {"available": bool(o.get("available")),
                                                   "confirms": bool(o.get("unsafe")),
                                                   "outputs": o.get("outputs")}}


def _summary(instances, results, rows, seconds) -> dict:
    """The summary document (docs/schemas/vnncomp.schema.json)."""
    from ..core.version import __version__

    return {"format": "symbounds-vnncomp-summary/1", "symbounds": __version__, "instances": instances,
            "results": results, "counts": {a: sum(r["answer"] == a for r in rows) for a in ANSWERS},
            "seconds": seconds, "rows": rows}


def run_vnncomp(args) -> int:
    from .args import precision

    prec = precision(args.prec)
    if not (1 <= args.max_boxes <= 10**8):
        raise UsageError(f"--max-boxes {args.max_boxes}: use between 1 and 10^8")
    try:
        instances = read_instances(args.instances)
    except VnncompError as e:
        raise UsageError(str(e)) from None
    for inst in instances:  # every file there before any work
        for path in (inst.network, inst.spec):
            if not os.path.isfile(path):
                raise UsageError(f"{args.instances}, line {inst.line}: {path}: no such file")
    if os.path.exists(args.results) and not os.path.isdir(args.results):
        raise UsageError(f"--results {args.results}: not a folder")
    os.makedirs(args.results, exist_ok=True)
    names = []
    for k, inst in enumerate(instances):
        names.append(os.path.join(args.results, f"{k:04d}_{_stem(inst.network)}_{_stem(inst.spec)}.txt"))
    check_out_folders(*names)
    rows = []
    t0 = time.monotonic()
    for k, (inst, path) in enumerate(zip(instances, names)):
        rec = run_limited(inst.network, inst.spec, inst.timeout, prec, args.max_boxes)
        cert = _cert_path(path) if rec["answer"] == "unsat" else None
        _write_outputs(rec, path, cert)
        row = _summary_row(rec, os.path.relpath(inst.network), os.path.relpath(inst.spec), inst.timeout, path, cert)
        rows.append(row)
        if not args.quiet:
            extra = f": {rec['message']}" if rec.get("message") and rec["answer"] == "error" else ""
            line = _witness_line(rec)
            print(f"symbounds vnncomp: [{k + 1}/{len(instances)}] {_stem(inst.network)} {_stem(inst.spec)}: "
                  f"{rec['answer']} ({rec['seconds']:.2f} s of {inst.timeout:g}){extra}"
                  + (f"; {line}" if line else ""), file=sys.stderr)
    summary = _summary(args.instances, args.results, rows, round(time.monotonic() - t0, 3))
    counts = summary["counts"]
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"symbounds vnncomp: {args.instances}: {len(rows)} instance(s); "
              + ", ".join(f"{a} {counts[a]}" for a in ANSWERS))
        print("| # | network | property | answer | seconds | timeout | witness / note |")
        print("|---|---|---|---|---|---|---|")
        for k, r in enumerate(rows):
            note = r["message"] or ""
            if r["witness"]:
                o = r["onnxruntime"]
                note = ("exact" if r["witness"]["checked"] == "exact" else "balls") + (
                    "" if o is None else ", onnxruntime " + ("confirms" if o["confirms"] else
                                                             "does not confirm" if o["available"] else "not run"))
            elif r["certificate"]:
                note = f"certificate {os.path.basename(r['certificate'])}"
            print(f"| {k} | {_stem(r['network'])} | {_stem(r['property'])} | {r['answer']} | "
                  f"{r['seconds']:.2f} | {r['timeout']:g} | {note} |")
    errors = [r for r in rows if r["answer"] == "error"]
    if errors:
        print(f"symbounds: error: {len(errors)} instance(s) ended in error; the first: {errors[0]['message']}",
              file=sys.stderr)
        return 2
    return 0


# ------------------------------------------------------------------------------------------
# symbounds check of a property certificate


def is_property_certificate(path: str) -> dict | None:
    """The file's JSON object when it is a property certificate, else None."""
    from ..core.property_certificate import PROPERTY_FORMAT
    from .certificate_out import certificate_of_format

    return certificate_of_format(path, PROPERTY_FORMAT)


def run_property_check(args, cert: dict) -> int:
    """The full re-verification, then the independent kernel (which reads both model formats,
    ``symbounds-transformer/1`` and the layer graphs ``symbounds-graph/1``); 0 only when both accept."""
    from ..core.property_certificate import PropertyCertificateError, check_property_certificate
    from .args import Bar, kernel_verdict

    bar = Bar(args, "box")
    full = 0
    try:
        info = check_property_certificate(cert, progress=lambda done, total: bar(done, total, "leaves re-checked"))
    except PropertyCertificateError as e:
        print(f"symbounds: certificate rejected: {e}", file=sys.stderr)
        full = 1
    finally:
        bar.close()
    if not full:
        src = cert.get("source") or {}
        print(f"property certificate valid: {info['leaves']} leaves cover the input box of "
              f"{src.get('property', 'the property')} ({info['inputs']} inputs; {info['nodes']} boxes re-evaluated); "
              f"on each, none of the {info['alternatives']} unsafe alternative(s) is reachable: unsat")
    return kernel_verdict(args, full, "leaves")

