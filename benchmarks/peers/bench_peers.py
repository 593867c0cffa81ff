"""auto_LiRPA (IBP, CROWN-IBP, CROWN, alpha-CROWN) on the boxes of the symbounds side, beside symbounds.

    benchmarks/peers/.venv/bin/python benchmarks/peers/bench_peers.py --side side.json \
        --out peers.json [--markdown table.md] [--timeout 240] [--memory-gib 6]

Run with the peer environment (``setup_peers.sh``); symbounds is not imported.  Each model file
of ``side.json`` (written by ``bench_symbounds_side.py``: the model paths, the boxes, symbounds'
enclosures, a 300-bit enclosure of ``T`` at each box centre, and for the [SL26] networks ``g``'s
enclosure over each box and ``eps``) is rebuilt by hand as a float64 torch module:

    X_0 = base^T + (E x) e_c^T         (tokens as rows, X = Z^T)
    attention:  X <- rho X + sum_h softmax((X W_Q^T)(X W_K^T)^T / tau) X W_V^T W_O^T
    ffn:        X <- eta X + relu(X W1^T + b1) W2^T + b2
    T = X[column, row]

(the heads of a layer stacked into one projection, zero-padded to a common width).  A layer graph
(``symbounds-graph/1``, from ``bench_graph_side.py``) is rebuilt node by node (:func:`build_graph_net`):
``affine`` as ``nn.Linear``, ``layer_norm`` as ``nn.LayerNorm``, ``gelu`` as auto_LiRPA's own GELU
module (``F.gelu``, the erf form), ``tanh``/``sigmoid`` as torch's, ``add``, ``select_tokens`` as an
index, ``attention`` as ``nn.MultiheadAttention`` computes it (the in-projections with biases, the
heads split, ``softmax(scale Q K^T) V``, the out-projection).  For every
method, the boxes of the model are bounded in one batched call (``--chunk MODEL=N``: N boxes per
call, where all of them at once do not fit in memory), and ``--single`` of them one box per call;
each (model, method) runs in its own process under a time and memory limit, so a failure is
recorded (its last error line) and the run goes on.  Times are CPU seconds of the child process
(one torch thread).  Validity: finite, lower <= upper, the interval contains the 300-bit ball of
``T`` at the centre (compared exactly, as fractions).  For the [SL26] boxes, "proves" means
``max(u - g_lo, g_hi - l) <= eps`` (the bound of ``|T - g|`` that symbounds' certification uses).
"""

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from fractions import Fraction as F

METHODS = ("IBP", "CROWN-IBP", "CROWN", "alpha-CROWN")


def load(path):
    with open(path) as f:
        return json.load(f)


def num(v) -> float:
    return float(F(v))


def build_net(mj):
    import torch
    from torch import nn

    dt = torch.float64
    T = lambda rows: torch.tensor([[num(v) for v in r] for r in rows], dtype=dt)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            e = mj["embedding"]
            base = T(e["base"])  # (D, n)
            self.D, self.n = base.shape
            self.register_buffer("base_t", base.t().contiguous().unsqueeze(0))  # (1, n, D)
            self.embed = nn.Linear(len(e["E"][0]), self.D, bias=False)
            self.embed.weight.data = T(e["E"])
            onehot = torch.zeros(1, self.n, 1, dtype=dt)
            onehot[0, int(e["column"]), 0] = 1
            self.register_buffer("onehot", onehot)
            self.blocks = nn.ModuleList()
            self.spec = []
            for L in mj["layers"]:
                skip = num(L.get("skip", "0"))
                if L["type"] == "attention":
                    if L["kind"] != "softmax":
                        raise ValueError("hardmax attention has no torch counterpart here")
                    heads = L["heads"]
                    dq = max(len(h["W_Q"]) for h in heads)
                    dv = max(len(h["W_V"]) for h in heads)
                    H = len(heads)
                    WQ = torch.zeros(H * dq, self.D, dtype=dt)
                    WK = torch.zeros(H * dq, self.D, dtype=dt)
                    WV = torch.zeros(H * dv, self.D, dtype=dt)
                    WO = torch.zeros(self.D, H * dv, dtype=dt)
                    for i, h in enumerate(heads):
                        a, b = len(h["W_Q"]), len(h["W_V"])
                        WQ[i * dq:i * dq + a] = T(h["W_Q"])
                        WK[i * dq:i * dq + a] = T(h["W_K"])
                        WV[i * dv:i * dv + b] = T(h["W_V"])
                        WO[:, i * dv:i * dv + b] = T(h["W_O"])
                    tau = num(L["tau"]) if "tau" in L else 1.0
                    mods = nn.ModuleList([nn.Linear(self.D, H * dq, bias=False), nn.Linear(self.D, H * dq, bias=False),
                                          nn.Linear(self.D, H * dv, bias=False), nn.Linear(H * dv, self.D, bias=False)])
                    for m, W in zip(mods, (WQ / tau, WK, WV, WO)):
                        m.weight.data = W
                    self.blocks.append(mods)
                    self.spec.append(("attention", skip, H, dq, dv))
                else:
                    l1 = nn.Linear(self.D, len(L["W1"]))
                    l1.weight.data, l1.bias.data = T(L["W1"]), torch.tensor([num(v) for v in L["b1"]], dtype=dt)
                    l2 = nn.Linear(len(L["W1"]), self.D)
                    l2.weight.data, l2.bias.data = T(L["W2"]), torch.tensor([num(v) for v in L["b2"]], dtype=dt)
                    self.blocks.append(nn.ModuleList([l1, nn.ReLU(), l2]))
                    self.spec.append(("ffn", skip))
            ro = mj["readout"]
            self.row, self.col = int(ro["row"]), int(ro["column"])

        def forward(self, x):
            X = self.base_t + self.embed(x).unsqueeze(1) * self.onehot  # (B, n, D)
            n = self.n
            for mods, sp in zip(self.blocks, self.spec):
                skip = sp[1]
                if sp[0] == "attention":
                    _, _, H, dq, dv = sp
                    Q = mods[0](X).reshape(-1, n, H, dq).transpose(1, 2)
                    K = mods[1](X).reshape(-1, n, H, dq).transpose(1, 2)
                    V = mods[2](X).reshape(-1, n, H, dv).transpose(1, 2)
                    S = Q.matmul(K.transpose(2, 3))  # (B, H, n, n)
                    O = torch.softmax(S, dim=-1).matmul(V).transpose(1, 2).reshape(-1, n, H * dv)
                    out = mods[3](O)
                else:
                    out = mods[2](mods[1](mods[0](X)))
                X = out if skip == 0 else (out + X if skip == 1 else out + skip * X)
            return X[:, self.col, self.row:self.row + 1]

    return Net().double().eval()


def build_graph_net(gj):
    """The layer graph ``gj`` as a float64 torch module: input ``(B, tokens * width)`` row by row,
    output ``(B, 1)`` (the graph's one output)."""
    import torch
    from torch import nn

    from auto_LiRPA.operators.gelu import GELU

    dt = torch.float64
    T = lambda rows: torch.tensor([[num(v) for v in r] for r in rows], dtype=dt)
    V = lambda v: torch.tensor([num(x) for x in v], dtype=dt)

    def linear(W, b):
        m = nn.Linear(len(W[0]), len(W), bias=True)
        m.weight.data, m.bias.data = T(W), (V(b) if b is not None else torch.zeros(len(W), dtype=dt))
        return m

    class Attention(nn.Module):
        def __init__(self, nd):
            super().__init__()
            sc = nd["scale"]
            self.scale = 1 / math.sqrt(sc["inv_sqrt"]) if isinstance(sc, dict) else num(sc)
            if nd.get("mask") is not None or nd.get("hardmax") or nd.get("sequence_length") not in (None,):
                raise ValueError("only unmasked softmax attention over all tokens is rebuilt here")
            self.h = int(nd["heads"])
            z = lambda k: nd.get(k) or ["0"] * len(nd["W" + k[1]])
            self.q, self.k = linear(nd["Wq"], z("bq")), linear(nd["Wk"], z("bk"))
            self.v, self.o = linear(nd["Wv"], z("bv")), linear(nd["Wo"], z("bo"))

        def forward(self, x):  # (B, n, E)
            B, n, _ = x.shape
            split = lambda y: y.reshape(B, n, self.h, -1).transpose(1, 2)  # (B, h, n, dk)
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            w = torch.softmax(q.matmul(k.transpose(2, 3)) * self.scale, dim=-1)
            return self.o(w.matmul(v).transpose(1, 2).reshape(B, n, -1))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.n, self.w = int(gj["input"]["tokens"]), int(gj["input"]["width"])
            self.inp, self.out = gj["input"]["name"], gj["output"]
            self.mods = nn.ModuleDict()
            self.plan = []
            for nd in gj["nodes"]:
                op, name = nd["op"], nd["name"]
                if op == "affine":
                    self.mods[name] = linear(nd["W"], nd.get("b"))
                elif op == "layer_norm":
                    m = nn.LayerNorm(len(nd["weight"]), eps=num(nd["eps"]))
                    m.weight.data, m.bias.data = V(nd["weight"]), V(nd["bias"])
                    self.mods[name] = m
                elif op in ("gelu", "tanh", "sigmoid", "relu"):
                    if op == "gelu" and "divisor" in nd:
                        raise ValueError("gelu with a divisor other than sqrt(2) is not rebuilt here")
                    self.mods[name] = {"gelu": GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "relu": nn.ReLU}[op]()
                elif op == "attention":
                    self.mods[name] = Attention(nd)
                elif op not in ("add", "select_tokens"):
                    raise ValueError(f"graph op {op!r} is not rebuilt here")
                self.plan.append((name, op, nd["inputs"], nd.get("indices")))

        def forward(self, x):
            vals = {self.inp: x.reshape(-1, self.n, self.w)}
            for name, op, ins, idx in self.plan:
                a = [vals[i] for i in ins]
                if op == "add":
                    vals[name] = a[0] + a[1]
                elif op == "select_tokens":
                    vals[name] = a[0][:, idx, :]
                else:
                    vals[name] = self.mods[name](a[0])
            y = vals[self.out]
            return y.reshape(y.shape[0], -1)[:, 0:1]

    return Net().double().eval()


def failure(e: BaseException) -> str:
    """The exception's type, message and the peer's line that raised it (an assertion has no message)."""
    import traceback

    tb = traceback.extract_tb(e.__traceback__)
    at = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno} ({tb[-1].line})" if tb else ""
    return f"{type(e).__name__}: {e}"[:160] + at


def run_one(side_path, name, method, single_n, iterations, chunk, crown_batch=None):
    """One (model, method) in this process: batched calls over all boxes (``chunk`` boxes per
    call, 0: all), then ``single_n`` boxes one per call.  Prints a JSON object."""
    import torch

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)  # auto_LiRPA's own tensors (relaxations, alphas) in float64 too
    from auto_LiRPA import BoundedModule, BoundedTensor, PerturbationLpNorm

    side = load(side_path)
    m = next(mm for mm in side["models"] if mm["name"] == name)
    mj = load(m["path"])
    net = build_graph_net(mj) if mj.get("format") == "symbounds-graph/1" else build_net(mj)
    boxes = m["boxes"]
    lo = torch.tensor([b["lo_float"] for b in boxes], dtype=torch.float64)
    hi = torch.tensor([b["hi_float"] for b in boxes], dtype=torch.float64)
    with torch.no_grad():
        fwd = net((lo + hi) / 2)[:, 0].tolist()
    t = time.process_time()
    lm = BoundedModule(net, torch.zeros(1, lo.shape[1], dtype=torch.float64), device="cpu",
                       bound_opts={"optimize_bound_args": {"iteration": iterations}, "verbosity": 0,
                                   **({"crown_batch_size": crown_batch, "batched_crown_max_vram_ratio": 0.9}
                                      if crown_batch else {})})
    t_build = time.process_time() - t
    meth = {"IBP": "IBP", "CROWN-IBP": "CROWN-IBP", "CROWN": "CROWN", "alpha-CROWN": "alpha-CROWN"}[method]

    def bounds(a, b):
        x = BoundedTensor((a + b) / 2, PerturbationLpNorm(norm=math.inf, x_L=a, x_U=b))
        if method == "alpha-CROWN":
            l, u = lm.compute_bounds(x=(x,), method=meth)
        else:
            with torch.no_grad():
                l, u = lm.compute_bounds(x=(x,), method=meth)
        return l.detach()[:, 0].tolist(), u.detach()[:, 0].tolist()

    out = {"name": name, "method": method, "build": t_build, "forward_centre": fwd}
    t = time.process_time()
    step = chunk or len(boxes)
    l, u, errors = [], [], {}
    for s in range(0, len(boxes), step):
        try:
            a, b = bounds(lo[s:s + step], hi[s:s + step])
        except Exception as e:  # noqa: BLE001 -- the peer's own failure, kept per box below
            if step == 1:
                raise
            # a failure of the batch: the boxes one by one, so the ones that fail are named
            a, b = [], []
            for i in range(s, min(s + step, len(boxes))):
                try:
                    x, y = bounds(lo[i:i + 1], hi[i:i + 1])
                except Exception as e1:  # noqa: BLE001
                    errors[i] = failure(e1)
                    x, y = [None], [None]
                a += x
                b += y
            out["batch_error"] = failure(e)
        l += a
        u += b
    out["batched"] = None if "batch_error" in out else (time.process_time() - t) / len(boxes)
    out["chunk"] = step
    out["lo"], out["hi"] = l, u
    out["box_errors"] = errors
    # one box per call: an even sample over the widths (of the boxes the peer bounds)
    idx = [i for i in range(0, len(boxes), max(1, len(boxes) // single_n)) if i not in errors][:single_n]
    t = time.process_time()
    for i in idx:
        bounds(lo[i:i + 1], hi[i:i + 1])
    out["single"] = (time.process_time() - t) / len(idx) if idx else None
    out["single_boxes"] = len(idx)
    print(json.dumps(out))


def limited(mem_gib):
    def f():
        b = int(mem_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (b, b))
        os.nice(10)
    return f


def last_error_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    errs = [ln for ln in lines if "Error" in ln or "error" in ln or "Exception" in ln]
    return (errs[-1] if errs else (lines[-1] if lines else "no output"))[:300]


def validity(lo, hi, centre):
    fin = lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi)
    ordered = fin and lo <= hi
    c_lo, c_hi = F(centre[0]), F(centre[1])
    return {"finite": fin, "ordered": ordered, "contains_centre": fin and F(lo) <= c_lo and c_hi <= F(hi)}


def err_bound(lo, hi, g):
    if lo is None or not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return None
    return max(F(hi) - F(g[0]), F(g[1]) - F(lo))


def summarise(m, tool, per_box, times):
    """Rows per width: median width over valid boxes, counts, times."""
    rows = []
    for w in sorted({b["width"] for b in m["boxes"]}, reverse=True):
        sel = [(b, r) for b, r in zip(m["boxes"], per_box) if b["width"] == w]
        ok = [r for _, r in sel if r["finite"] and r["ordered"] and r["contains_centre"]]
        widths = sorted(r["hi"] - r["lo"] for r in ok)
        row = {"model": m["name"], "tool": tool, "width": w, "boxes": len(sel),
               "finite": sum(r["finite"] for _, r in sel),
               "ordered": sum(r["ordered"] for _, r in sel),
               "contains": sum(r["contains_centre"] for _, r in sel), "valid": len(ok),
               "failed": sum(bool(r.get("failed")) for _, r in sel),
               "median_width": widths[len(widths) // 2] if widths else None, **times}
        if m.get("eps"):
            row["proves"] = sum(bool(r.get("proves")) for _, r in sel)
        rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--side", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--markdown")
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--memory-gib", type=float, default=6)
    ap.add_argument("--single", type=int, default=8, help="boxes timed one per call")
    ap.add_argument("--iterations", type=int, default=20, help="alpha-CROWN optimisation steps")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--chunk", action="append", default=[], metavar="MODEL=N",
                    help="boxes per batched call for MODEL (default: all of them in one call)")
    ap.add_argument("--crown-batch", type=int, help="auto_LiRPA's crown_batch_size: intermediate bounds "
                    "back-substituted this many neurons at a time (less memory, more time)")
    ap.add_argument("--render", metavar="PEERS.json", nargs="+", help="print the tables of earlier runs' --out "
                    "files (a later file's (model, method) results replace an earlier one's)")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "METHOD"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.render:
        side, res = load(a.side), merged([load(p) for p in a.render])
        # symbounds' rows from this side file (a later side run on the same boxes), the peers' from the runs
        names = {m["name"] for m in side["models"]}  # the side file may hold some of the runs' models
        res["table"] = [r for m in side["models"] for r in side_rows(m)] + \
            [r for r in res["table"] if not r["tool"].startswith("symbounds ") and r["model"] in names]
        res["results"] = [r for r in res["results"] if r["name"] in names]
        add_ratios(res["table"], side, res["results"])
        res["meta"]["agreement"] = agreement(side, res["results"])
        print(markdown(res["table"], side, res["meta"]) + "\n" + versus(side, res["results"]))
        return 0
    if a.one:
        chunks = dict(c.split("=") for c in a.chunk)
        run_one(a.side, a.one[0], a.one[1], a.single, a.iterations, int(chunks.get(a.one[0], 0)), a.crown_batch)
        return 0
    import auto_LiRPA
    import torch

    side = load(a.side)
    results, table = [], []
    for m in side["models"]:
        eps = F(m["eps"]) if m.get("eps") else None
        table += side_rows(m)
        for method in a.methods.split(","):
            cmd = [sys.executable, os.path.abspath(__file__), "--side", a.side, "--out", "-", "--single",
                   str(a.single), "--iterations", str(a.iterations), "--one", m["name"], method]
            cmd += [f"--chunk={c}" for c in a.chunk]
            if a.crown_batch:
                cmd += ["--crown-batch", str(a.crown_batch)]
            t0 = time.time()
            try:
                p = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=a.timeout,
                                   preexec_fn=limited(a.memory_gib))
                res = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 else None
                err = None if res else last_error_line(p.stderr or p.stdout)
            except subprocess.TimeoutExpired:
                res, err = None, f"did not finish within {a.timeout:.0f} s (wall)"
            wall = time.time() - t0
            print(f"{m['name']} {method}: {'ok' if res else err} ({wall:.1f} s wall)", file=sys.stderr, flush=True)
            if res is None:
                results.append({"name": m["name"], "method": method, "error": err})
                table.append({"model": m["name"], "tool": "auto_LiRPA " + method, "error": err})
                continue
            per = []
            for b, l, u in zip(m["boxes"], res["lo"], res["hi"]):
                r = {"lo": l, "hi": u, "failed": l is None, **validity(l, u, b["centre"])}
                if eps is not None:
                    e = err_bound(l, u, b["g"])
                    r["proves"] = e is not None and r["contains_centre"] and e <= eps
                per.append(r)
            res["per_box"] = per
            results.append(res)
            notes = {"single": res["single"], "batched": res["batched"]}
            if res.get("batch_error"):
                errs = res.get("box_errors") or {}
                notes["note"] = (f"the batched call failed (`{res['batch_error']}`), so the boxes were bounded one "
                                 f"by one: {len(errs)} of {len(per)} failed"
                                 + (f" (`{next(iter(errs.values()))}`)" if errs else ""))
            table += summarise(m, "auto_LiRPA " + method, per, notes)
    add_ratios(table, side, results)
    meta = {"torch": torch.__version__, "auto_LiRPA": auto_LiRPA.__version__, "python": sys.version.split()[0],
            "agreement": agreement(side, results)}
    with open(a.out, "w") as f:
        json.dump({"meta": meta, "results": results, "table": table}, f)
    md = markdown(table, side, meta) + "\n" + versus(side, results)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(md)
    print(md)
    return 0


def side_rows(m) -> list:
    """The table rows of symbounds' enclosures of one model of the side file."""
    rows, t = [], m["times"]
    for key, label in side_tools(m).items():
        times = {"single": t.get(f"{key}_single", t.get("arb_single") if key == "arb" else None),
                 "batched": t.get(f"{key}_batched")}
        rows += summarise(m, label, [b[key] for b in m["boxes"]], times)
    return rows


def merged(runs: list) -> dict:
    """One results file from several runs on one side file: each (model, method) from the last run
    that has it (its table rows with it); the symbounds rows and the meta from the first."""
    out = {"meta": runs[0]["meta"], "results": list(runs[0]["results"]), "table": list(runs[0]["table"])}
    for run in runs[1:]:
        for r in run["results"]:
            key = (r["name"], r["method"])
            tool = "auto_LiRPA " + r["method"]
            out["results"] = [x for x in out["results"] if (x["name"], x["method"]) != key] + [r]
            rows = [t for t in run["table"] if t["model"] == r["name"] and t["tool"] == tool]
            at = [i for i, t in enumerate(out["table"]) if t["model"] == r["name"] and t["tool"] == tool]
            keep = [t for t in out["table"] if not (t["model"] == r["name"] and t["tool"] == tool)]
            i = at[0] if at else len(keep)
            out["table"] = keep[:i] + rows + keep[i:]
    return out


def side_tools(m) -> dict:
    """symbounds' enclosures of a side file's model: ``{key in each box: table label}``; the first
    is the baseline of the ratios."""
    return m.get("tools") or {"float": "symbounds float pass", "arb": "symbounds Arb Taylor"}


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def agreement(side, results) -> dict:
    """Per model: the largest ``|torch float64 forward - 300-bit T|`` at the box centres (a check
    that the hand-built module is the model file's network)."""
    out = {}
    for m in side["models"]:
        r = next((r for r in results if r["name"] == m["name"] and "forward_centre" in r), None)
        if r is not None:
            out[m["name"]] = max(abs(float(F(b["centre"][0])) - f) for b, f in zip(m["boxes"], r["forward_centre"]))
    return out


def markdown(table, side, meta):
    """One table per model: a row per tool, a column per box width ("median enclosure width
    (valid / boxes)", then the median ratio to the side's first tool -- symbounds' float pass, or
    the adaptive bound of a layer graph -- on boxes valid for both)."""
    widths = side["widths"]
    lines = [f"torch {meta['torch']}, auto_LiRPA {meta['auto_LiRPA']}, Python {meta['python']}", ""]
    for m in side["models"]:
        rows = [r for r in table if r["model"] == m["name"]]
        pou = bool(m.get("eps"))
        base = next(iter(side_tools(m).values()))
        short = base.replace("symbounds ", "")
        head = (f"**{m['name']}** (d = {m['d']}, {m['tokens']} tokens of width {m['width_D']}; layers "
                f"{', '.join(m['layers'])}{'; eps = ' + m['eps'] if pou else ''}; {len(m['boxes']) // len(widths)} "
                "boxes per width; the torch module's float64 output at the centres is within "
                f"{fmt(meta.get('agreement', {}).get(m['name']), '.1e')} of the 300-bit value)")
        lines += [head, "",
                  "| tool | " + " | ".join(f"width {w:g}" for w in widths)
                  + (" | proves abs(T - g) <= eps (per width)" if pou else "")
                  + f" | boxes narrower than the {short} (smallest ratio) | s / box, one per call | s / box, batched |",
                  "|---|" + "---|" * len(widths) + ("---|" if pou else "") + "---|---|---|"]
        tools = list(dict.fromkeys(r["tool"] for r in rows))
        for tool in tools:
            rs = [r for r in rows if r["tool"] == tool]
            if "error" in rs[0]:
                lines.append(f"| {tool} | failed: `{rs[0]['error']}` |" + " |" * (len(widths) - 1)
                             + (" - |" if pou else "") + " - | - | - |")
                continue
            by = {r["width"]: r for r in rs}
            cells = []
            for w in widths:
                r = by[w]
                c = f"{fmt(r['median_width'], '.2e')} ({r['valid']}/{r['boxes']})"
                if r.get("ratio") is not None and tool != base:
                    c += f", x{r['ratio']:.3g}"
                if r["valid"] < r["boxes"]:
                    nf = r["boxes"] - r["finite"] - r.get("failed", 0)
                    c += (f" [failed {r['failed']}, " if r.get("failed") else " [") + \
                         f"non-finite {nf}, lo > hi {r['finite'] - r['ordered']}, " \
                         f"centre outside {r['ordered'] - r['contains']}]"
                cells.append(c)
            pr = (" | " + " / ".join(str(by[w]["proves"]) for w in widths)) if pou else ""
            b = rs[0]["batched"]
            if tool == base:
                nar = "-"
            else:
                mins = [r["min_ratio"] for r in rs if r.get("min_ratio") is not None]
                nar = f"{sum(r.get('narrower', 0) for r in rs)}" + (f" (x{min(mins):.3g})" if mins else "")
            lines.append(f"| {tool} | " + " | ".join(cells) + pr
                         + f" | {nar} | {fmt(rs[0]['single'], '.2e')} | {fmt(b, '.2e')} |")
        for tool in tools:
            note = next((r.get("note") for r in rows if r["tool"] == tool and r.get("note")), None)
            if note:
                lines += ["", f"{tool}: {note}."]
        lines.append("")
    return "\n".join(lines)


def near1(v: float) -> str:
    """A ratio; one within 10^-3 of 1 as ``1 + d`` so its size shows."""
    return f"1{v - 1:+.1e}" if abs(v - 1) < 1e-3 else f"{v:.4g}"


def versus(side, results) -> str:
    """For the layer-graph models: each symbounds enclosure's width divided by CROWN's and
    alpha-CROWN's on the same box (median / max over the boxes valid for both, and how many boxes
    the peer is narrower on by more than 10^-6 relative), and the sampled spread (values the network
    certainly reaches, so every valid enclosure is at least this wide) divided by each."""
    ok = lambda v: v is not None and v["finite"] and v["ordered"] and v["contains_centre"]
    lines = []
    for m in side["models"]:
        if "tools" not in m:
            continue
        widths = side["widths"]
        lines += [f"**{m['name']}**: symbounds' width / the peer's, median / max / boxes the peer is narrower on",
                  "", "| | " + " | ".join(f"width {w:g}" for w in widths) + " |", "|---|" + "---|" * len(widths)]
        peers = {r["method"]: r.get("per_box") for r in results if r["name"] == m["name"] and r.get("per_box")}
        for key, label in side_tools(m).items():
            for method in ("CROWN", "alpha-CROWN"):
                if method not in peers:
                    continue
                cells = []
                for w in widths:
                    rs = sorted((b[key]["hi"] - b[key]["lo"]) / (p["hi"] - p["lo"])
                                for b, p in zip(m["boxes"], peers[method])
                                if b["width"] == w and ok(b[key]) and ok(p) and p["hi"] > p["lo"])
                    cells.append(f"{near1(rs[len(rs) // 2])} / {near1(rs[-1])} / {sum(v > 1 + 1e-6 for v in rs)}"
                                 if rs else "-")
                lines.append(f"| {label.replace('symbounds ', '')} ÷ {method} | " + " | ".join(cells) + " |")
        for method in ("bound",) + tuple(k for k in ("CROWN", "alpha-CROWN") if k in peers):
            cells = []
            for w in widths:
                rs = []
                for i, b in enumerate(m["boxes"]):
                    e = b["bound"] if method == "bound" else peers[method][i]
                    sl, sh = b["bound"]["sampled"]
                    if b["width"] == w and ok(e) and sl is not None and e["hi"] > e["lo"]:
                        rs.append((sh - sl) / (e["hi"] - e["lo"]))
                rs.sort()
                cells.append(f"{rs[len(rs) // 2]:.4g} (min {rs[0]:.4g})" if rs else "-")
            name = "bound (adaptive, tol 1/10)" if method == "bound" else method
            lines.append(f"| sampled spread ÷ {name} | " + " | ".join(cells) + " |")
        # the sampled ends are values the network reaches (rigorous, at points): an enclosure that
        # leaves one out is not an enclosure (floats compared with a margin of 4 ulps of the end)
        for method in peers:
            miss = []
            for w in widths:
                n = 0
                for b, p in zip(m["boxes"], peers[method]):
                    sl, sh = b["bound"]["sampled"]
                    if b["width"] == w and p["finite"] and sl is not None:
                        n += p["lo"] > sl + 4 * math.ulp(sl) or p["hi"] < sh - 4 * math.ulp(sh)
                miss.append(str(n))
            lines.append(f"| {method}: boxes whose enclosure misses a sampled value | " + " | ".join(miss) + " |")
        lines.append("")
    return "\n".join(lines)


def add_ratios(table, side, results):
    """``ratio``: the median over boxes valid for both of (tool's width / the baseline's width: the
    side's first tool)."""
    per, first = {}, {}
    for m in side["models"]:
        for i, (key, label) in enumerate(side_tools(m).items()):
            per[(m["name"], label)] = [b[key] for b in m["boxes"]]
            if i == 0:
                first[m["name"]] = label
    for r in results:
        if "per_box" in r:
            per[(r["name"], "auto_LiRPA " + r["method"])] = r["per_box"]
    ok = lambda v: v["finite"] and v["ordered"] and v["contains_centre"]
    for row in table:
        if "error" in row:
            continue
        m = next(mm for mm in side["models"] if mm["name"] == row["model"])
        base, mine = per[(row["model"], first[row["model"]])], per[(row["model"], row["tool"])]
        rs = sorted((y["hi"] - y["lo"]) / (x["hi"] - x["lo"]) for b, x, y in zip(m["boxes"], base, mine)
                    if b["width"] == row["width"] and ok(x) and ok(y) and x["hi"] > x["lo"])
        row["ratio"] = rs[len(rs) // 2] if rs else None
        row["min_ratio"] = rs[0] if rs else None
        row["narrower"] = sum(v < 1 - 1e-6 for v in rs)  # narrower than the baseline by more than 1e-6


if __name__ == "__main__":
    sys.exit(main())
