"""auto_LiRPA's IBP and CROWN bounds on the soundness benchmark, against symbounds' proved answers.

    benchmarks/peers/.venv/bin/python benchmarks/soundness/run_peers.py OUTDIR \
        --summary OUTDIR/summary.json --out OUTDIR/peers.json [--markdown table.md] [--timeout 600]
    ... --render OUTDIR/peers.json --out -     # the table again from a run's raw results

Run with the peer environment (benchmarks/peers/setup_peers.sh); symbounds is not imported.  Each
network's model file (OUTDIR/models/NAME.json: the network as read back exactly from its ONNX graph)
is rebuilt as a float64 torch module by ``benchmarks/peers/bench_peers.py``'s ``build_net`` (networks
with a readout only: the [AFZ25] network, which outputs every entry of its last state, is not
run).  For each (network, method) a child process bounds the outputs over every instance's box,
one box per call, under a time and memory limit; an exception is that instance's crash, a child
that dies or runs out of time crashes all of its instances.

The peer's answer: ``unsat`` when on the bounds ``[l, u]`` every alternative of the unsafe region
has a constraint whose range (interval arithmetic on ``[l, u]``, exact fractions) lies on its
false side, else ``unknown`` (bounds alone never answer ``sat``).  Compared with symbounds'
answer (``summary.json`` of ``symbounds vnncomp --json``): **wrong** = the peer answers ``unsat``
where symbounds found an exact counterexample; **invalid** = NaN or infinite bounds, ``l > u``, or an
interval that excludes the output symbounds certified at its witness (exact, or an Arb ball) -- a
wrong answer is usually invalid too, the two columns overlap; **unknown**; **crashed**; **right** =
the peer's ``unsat`` agrees with symbounds' ``unsat``.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time
from fractions import Fraction as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "peers"))
METHODS = ("IBP", "CROWN")


def load(path):
    with open(path) as f:
        return json.load(f)


def child(outdir, network, method):
    import torch

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    from auto_LiRPA import BoundedModule, BoundedTensor, PerturbationLpNorm
    from bench_peers import build_net

    meta = [m for m in load(os.path.join(outdir, "instances.json"))["instances"] if m["network"] == network]
    net = build_net(load(os.path.join(outdir, meta[0]["model"])))
    d = len(meta[0]["lo"])
    lm = BoundedModule(net, torch.zeros(1, d, dtype=torch.float64), device="cpu", bound_opts={"verbosity": 0})
    out = []
    for m in meta:
        a = torch.tensor([[float(v) for v in m["lo"]]], dtype=torch.float64)
        b = torch.tensor([[float(v) for v in m["hi"]]], dtype=torch.float64)
        t = time.process_time()
        try:
            x = BoundedTensor((a + b) / 2, PerturbationLpNorm(norm=math.inf, x_L=a, x_U=b))
            with torch.no_grad():
                lo, hi = lm.compute_bounds(x=(x,), method=method)
            out.append({"name": m["name"], "lo": [float(v) for v in lo[0]], "hi": [float(v) for v in hi[0]],
                        "seconds": time.process_time() - t})
        except Exception as e:  # recorded: the instance crashed
            out.append({"name": m["name"], "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}",
                        "seconds": time.process_time() - t})
    print(json.dumps(out))


def peer_answer(m, lo, hi):
    if any(v is None or not math.isfinite(v) for v in lo + hi):
        return "invalid", "non-finite bound"
    if any(a > b for a, b in zip(lo, hi)):
        return "invalid", "lower > upper"
    L, U = [F(v) for v in lo], [F(v) for v in hi]
    for conj in m["unsafe"]:
        ruled_out = False
        for c in conj:
            coeffs = [F(v) for v in c["coeffs"]]
            low = F(c["const"]) + sum((a * (L[j] if a > 0 else U[j]) for j, a in enumerate(coeffs)), F(0))
            if (low >= 0) if c["strict"] else (low > 0):
                ruled_out = True
                break
        if not ruled_out:
            return "unknown", ""
    return "unsat", ""


def excludes(lo, hi, y):
    """Does ``[lo, hi]`` exclude a certified output ``y`` (exact ``p/q`` or a ball ``[m +/- r]``)?"""
    for a, b, v in zip(lo, hi, y):
        s = v.strip()
        if s.startswith("["):
            mid, rad = s[1:-1].split("+/-")
            c, r = F(mid.strip()), F(rad.strip())
            vlo, vhi = c - r, c + r
        else:
            vlo = vhi = F(s)
        if math.isfinite(a) and math.isfinite(b) and (F(b) < vlo or F(a) > vhi):
            return True
    return False


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("outdir")
    ap.add_argument("--summary", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--memory-gib", type=float, default=6)
    ap.add_argument("--render", default=None, metavar="PEERS.json",
                    help="classify the raw peer results of an earlier run again (no peer is run)")
    ap.add_argument("--child", nargs=2, metavar=("NETWORK", "METHOD"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.outdir, *a.child) or 0
    meta = load(os.path.join(a.outdir, "instances.json"))["instances"]
    networks = []
    for m in meta:
        if m["network"] not in networks:
            networks.append(m["network"])
    results = load(a.render)["results"] if a.render else {}
    for net in ([] if a.render else networks):
        mj = load(os.path.join(a.outdir, meta[[x["network"] for x in meta].index(net)]["model"]))
        for method in METHODS:
            key = f"{net}/{method}"
            if "readout" not in mj or "embedding" not in mj:
                results[key] = {"skipped": "the torch rebuild covers networks with a readout only"}
                continue
            t = time.time()
            import resource

            def limit(gib=a.memory_gib):
                b = int(gib * (1 << 30))
                resource.setrlimit(resource.RLIMIT_AS, (b, b))
                os.nice(10)

            try:
                p = subprocess.run([sys.executable, __file__, a.outdir, "--summary", a.summary, "--out", "-",
                                    "--child", net, method], capture_output=True, text=True, timeout=a.timeout,
                                   preexec_fn=limit)
                rows = json.loads(p.stdout) if p.returncode == 0 else None
                results[key] = {"rows": rows} if rows is not None else {
                    "failed": (p.stderr.strip().splitlines() or ["no output"])[-1][:300]}
            except subprocess.TimeoutExpired:
                results[key] = {"failed": f"timeout after {a.timeout:g} s"}
            print(f"run_peers: {key}: {time.time() - t:.1f} s", file=sys.stderr)
    summary = load(a.summary)  # read after the peers ran (symbounds may still be writing it meanwhile)
    ours = {os.path.normpath(r["property"]).split(os.sep)[-1]: r for r in summary["rows"]}
    table = []
    for m in meta:
        name = os.path.basename(m["vnnlib"])
        r = ours.get(name)
        sym = r["answer"] if r else "missing"
        for method in METHODS:
            res = results[f"{m['network']}/{method}"]
            row = {"instance": m["name"], "family": m["family"], "method": method, "symbounds": sym}
            if "skipped" in res:
                row.update(peer="not run", note=res["skipped"])
            elif "failed" in res:
                row.update(peer="crashed", note=res["failed"])
            else:
                pr = next(x for x in res["rows"] if x["name"] == m["name"])
                if "error" in pr:
                    row.update(peer="crashed", note=pr["error"])
                else:
                    ans, note = peer_answer(m, pr["lo"], pr["hi"])
                    row.update(peer=ans, note=note, lo=pr["lo"], hi=pr["hi"], seconds=pr["seconds"])
                    if ans != "invalid" and sym == "sat" and r.get("witness") and excludes(pr["lo"], pr["hi"],
                                                                                         r["witness"]["y"]):
                        row.update(invalid=True, note="excludes the certified output at the witness")
                    if ans == "invalid":
                        row["invalid"] = True
                    if ans == "unsat" and sym == "sat":
                        row["wrong"] = True
            table.append(row)
    if a.out != "-":
        with open(a.out, "w") as f:
            json.dump({"rows": table, "results": results}, f, indent=1)
    md = markdown(table)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    print(md)
    return 0


def markdown(table):
    fams = []
    for r in table:
        if r["family"] not in fams:
            fams.append(r["family"])
    lines = ["| family | method | instances (symbounds unsat / sat / other) | right | wrong | invalid | unknown | crashed | not run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for fam in fams + ["all"]:
        for method in METHODS:
            rows = [r for r in table if (fam == "all" or r["family"] == fam) and r["method"] == method]
            uns = sum(r["symbounds"] == "unsat" for r in rows)
            sat = sum(r["symbounds"] == "sat" for r in rows)
            other = len(rows) - uns - sat
            right = sum(r["peer"] == "unsat" and r["symbounds"] == "unsat" for r in rows)
            wrong = sum(bool(r.get("wrong")) for r in rows)
            cnt = {k: sum(r["peer"] == k for r in rows) for k in ("unknown", "crashed", "not run")}
            cnt["invalid"] = sum(bool(r.get("invalid")) for r in rows)
            lines.append(f"| {fam} | {method} | {len(rows)} ({uns} / {sat} / {other}) | {right} | {wrong} | {cnt['invalid']} | "
                         f"{cnt['unknown']} | {cnt['crashed']} | {cnt['not run']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
