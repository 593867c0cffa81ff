"""The softmax variant of exact sequence interpolation [AFZ25], certified (docs/alcalde.md, The softmax variant).

The hardmax blocks of separation, leader selection and collapse are kept, every attention layer
becoming a softmax at temperature ``tau`` (scores ``<A x_i, x_l> / tau``).  A softmax collapse
leaves each cluster a tiny ball around its leader or sphere point, and the separation shifts are
slightly token-dependent, so the interpolation stage is replaced by:

* one **line layer** (non-residual, ``eta = 0``): ``x -> o + e_1 sigma(<w, x> - a_0)``.  A
  residual width-4 layer has Jacobian ``I + (rank <= 4)`` and can never flatten a ``d``-ball;
  this one flattens everything onto the line ``o + e_1 t``, where the cluster of collapsed point
  ``c`` sits near ``t_c = <w, c> - a_0`` (``w`` gives distinct ``t_c``, minimum gap ``g``), and
  ``o_1`` exceeds every target's first coordinate, so no target lies on the used part of the line;
* one **snap block per cluster**: ``z + sum_{k<4} W_k sigma(z_1 - a_k)`` with breakpoints
  ``a = (alpha - delta, alpha, beta, beta + delta)``, ``[alpha, beta] = o_1 + t_c -+ g/4``,
  ``delta = g/4``: equal to the cluster's target ``y_c`` for ``z_1`` in ``[alpha, beta]`` (the
  linear parts cancel the token) and the identity outside ``[alpha - delta, beta + delta]``.

Blocks: ``K + M + 1 + M`` (paper: ``2M + 3N``).

**Certificate** (two parts, both rigorous):

1. Arb balls (:class:`~symbounds.core.contexts.BallContext`): every token after the line layer has
   coordinates ``2..d`` exactly ``o`` and first coordinate inside ``[alpha_c, beta_c]`` of one of
   its own sequence's clusters, and every cluster of the sequence receives a token.
2. Exact rationals: on each segment ``{o + e_1 t : z_1 in [alpha_c, beta_c]}`` the remaining
   layers are one affine map (every ReLU pre-activation has the same sign at both ends, and is
   affine in ``t`` in between) whose values at both ends equal ``y_c``; an affine map equal at two
   points of a segment is constant on it.  So every token of the cluster is mapped *exactly* to
   ``y_c``, although a ball evaluation of the same layers can only give a small ball around it.

``tau`` is the temperature used; no ``tau*`` is certified (the proof is at the given ``tau``).
"""

from __future__ import annotations

import random
from dataclasses import replace
from fractions import Fraction

from ...core.claims import conclude
from ...core.contexts import BallContext, ExactContext
from ...core.exact import as_fraction
from ...core.transformer import Attention, FeedForward, Transformer, forward
from . import construction as al
from .claims import CLAIMS
from .dataset import Dataset

__all__ = ["build_softmax", "certify_softmax", "ball_forward"]


def _line_and_snap(ds: Dataset, leaders, sphere, rng):
    """The line layer and one snap layer per cluster; returns (layers, clusters)."""
    d = ds.d
    centres, targets, owner = [], [], []
    for j in range(ds.N):
        for c, y in zip([leaders[j]] + sphere[j], ds.targets[j]):
            centres.append(c)
            targets.append(y)
            owner.append(j)
    for attempt in range(200):
        w = tuple(rng.randint(1, 2**10) for _ in range(d)) if attempt else (1,) * d
        proj = [al.dot(w, c) for c in centres]
        if len(set(proj)) == len(proj):
            break
    else:
        raise al.ConstructionError("no direction separates the collapsed points")
    s = sorted(proj)
    g = min((b - a for a, b in zip(s, s[1:])), default=4)
    a0 = s[0] - g  # t_c = <w, c> - a0 >= g > 0
    ymax = max(abs(y[0]) for Y in ds.targets for y in Y)
    o = (Fraction(int(ymax) + 1 + g),) + (Fraction(0),) * (d - 1)  # o_1 > every y_1 (and z_1 > o_1)
    # line layer: eta = 0, x -> o + e_1 sigma(<w,x> - a0); a constant unit carries o
    e1 = tuple(1 if r == 0 else 0 for r in range(d))
    W2 = tuple((Fraction(e1[r]), o[r]) for r in range(d))
    line = FeedForward((w, (0,) * d), (Fraction(-a0), Fraction(1)), W2, (0,) * d, 0)
    layers = [line, al.identity_attention(d, "softmax")]
    clusters = []
    delta = Fraction(g, 4)
    for c, y, j, p in zip(centres, targets, owner, proj):
        mid = o[0] + (p - a0)
        alpha, beta = mid - delta, mid + delta
        zrest = o[1:]
        G_alpha = tuple(y[r] - (alpha if r == 0 else zrest[r - 1]) for r in range(d))
        G_beta = tuple(y[r] - (beta if r == 0 else zrest[r - 1]) for r in range(d))
        s0 = tuple(v / delta for v in G_alpha)
        s1 = tuple(Fraction(-1 if r == 0 else 0) for r in range(d))
        s2 = tuple(-v / delta for v in G_beta)
        Ws = [s0, al.sub(s1, s0), al.sub(s2, s1), tuple(-v for v in s2)]
        bks = [alpha - delta, alpha, beta, beta + delta]
        ff = FeedForward(tuple(e1 for _ in range(4)), tuple(-b for b in bks),
                         tuple(tuple(Ws[k][r] for k in range(4)) for r in range(d)), (0,) * d, 1)
        layers += [ff, al.identity_attention(d, "softmax")]
        clusters.append({"sequence": j, "centre": c, "target": y, "alpha": alpha, "beta": beta})
    return layers, clusters, o


def build_softmax(ds: Dataset, tau=Fraction(1, 64), seed: int = 0) -> al.Construction:
    """The softmax Transformer (temperature ``tau``) with the line and snap layers."""
    tau = Fraction(tau)
    if tau <= 0:
        raise ValueError("tau must be positive")
    rng = random.Random(seed)
    layers, _, f = al.build_core(ds, rng)
    layers = [replace(layer, kind="softmax", tau=tau) if isinstance(layer, Attention) else layer
              for layer in layers]
    stages = f["stages"]
    tail, clusters, o = _line_and_snap(ds, f["leaders"], f["sphere"], rng)
    stages["line"] = len(layers) + 1  # the input of the line block's attention = the line layer's output
    layers += tail
    stages["final"] = len(layers)
    model = Transformer(tuple(al.balance(layer) for layer in layers), None, None, "tokens")
    con = al.Construction(ds, model, "softmax", f["K"], f["scale"], f["shift"], stages, f["chosen"],
                          f["leaders"], f["sphere"], [], f["gammas"], attention="softmax")
    con.notes.update({"tau": tau, "clusters": clusters, "o": o})
    return con


# ------------------------------------------------------------------------------------------
# evaluation: the generic forward pass, on the tokens as columns


def ball_forward(ctx, model: Transformer, X, upto: int | None = None, start: int = 0):
    """Tokens (rows) of one sequence through layers ``start..upto-1``, in ``ctx`` numbers: the
    generic :func:`~symbounds.core.transformer.forward` on the ``d x n`` matrix of columns ``X^T``
    (``X`` holds exact numbers, or ``ctx`` numbers when ``start > 0``)."""
    Z = forward(ctx, model, _columns(X), start=start, stop=upto)
    return _columns(Z)


def _columns(X) -> list:
    """The transpose of a list of rows."""
    return [list(c) for c in zip(*X)]


# ------------------------------------------------------------------------------------------
# the certificate


def _segments_exact(con) -> tuple[bool, str]:
    """Part 2: on each cluster segment the layers after the line layer are constant = target."""
    ex = ExactContext()
    model, st = con.model, con.stages
    tail = Transformer(model.layers[st["line"]:], None, None, "tokens")
    for layer in tail.layers:
        if isinstance(layer, Attention) and not (layer.skip == 1 and all(
                all(v == 0 for row in h.W_O for v in row) or all(v == 0 for row in h.W_V for v in row)
                for h in layer.heads)):
            return False, "an attention layer after the line layer is not the identity"
    o = con.notes["o"]
    for k, cl in enumerate(con.notes["clusters"]):
        ends = [(z1,) + tuple(o[1:]) for z1 in (cl["alpha"], cl["beta"])]
        pats, outs = [], []
        for z in ends:
            x = [ex.convert(v) for v in z]
            pat = []
            for layer in tail.layers:
                if isinstance(layer, Attention):
                    continue
                h = [sum((ex.convert(w) * v for w, v in zip(row, x)), ex.zero) + ex.convert(b)
                     for row, b in zip(layer.W1, layer.b1)]
                pat.append([(v > 0) - (v < 0) for v in h])
                s = [v if v > 0 else ex.zero for v in h]
                x = [ex.convert(layer.skip) * xv + sum((ex.convert(w) * sv for w, sv in zip(row, s)), ex.zero)
                     + ex.convert(b2) for xv, row, b2 in zip(x, layer.W2, layer.b2)]
            pats.append(pat)
            outs.append(tuple(as_fraction(v) for v in x))
        for pa, pb in zip(*pats):
            for a, b in zip(pa, pb):
                if a * b < 0:  # a sign change inside the segment: not one affine piece
                    return False, f"cluster {k}: a ReLU changes sign on its segment"
        if outs[0] != tuple(cl["target"]) or outs[1] != tuple(cl["target"]):
            return False, f"cluster {k} (sequence {cl['sequence']}): segment ends map to {outs}, not its target"
    return True, ""


def _line_states(ctx, con, model) -> list:
    """The ``d x n_j`` state of every sequence after the line layer (input of layer ``line``)."""
    return [forward(ctx, model, _columns(X), stop=con.stages["line"]) for X in con.dataset.inputs]


def _place_tokens(ctx, con, states) -> tuple[str, str]:
    """Part 1 in one precision: ``("proved" | "refuted" | "undecided", note)``."""
    clusters, o = con.notes["clusters"], con.notes["o"]
    with ctx.scope():
        for j, Zj in enumerate(states):
            own = [cl for cl in clusters if cl["sequence"] == j]
            hit = [False] * len(own)
            for t, z in enumerate(_columns(Zj)):
                for r, (zr, orr) in enumerate(zip(z[1:], o[1:])):
                    diff = zr - ctx.convert(orr)
                    if not ctx.is_zero(diff):
                        off = ctx.lt(ctx.zero, ctx.abs(diff))
                        return ("refuted" if off else "undecided"), f"sequence {j} token {t}: coordinate {r + 1} " \
                            f"is {ctx.to_str(zr, 12)}, not exactly {orr}"
                lo = [ctx.convert(cl["alpha"]) for cl in own]
                hi = [ctx.convert(cl["beta"]) for cl in own]
                k = next((k for k in range(len(own)) if ctx.le(lo[k], z[0]) and ctx.le(z[0], hi[k])), None)
                if k is None:
                    outside = all(ctx.lt(z[0], a) or ctx.lt(b, z[0]) for a, b in zip(lo, hi))
                    return ("refuted" if outside else "undecided"), \
                        f"sequence {j} token {t}: z_1 = {ctx.to_str(z[0], 12)} on none of its segments"
                hit[k] = True
            if not all(hit):
                return "refuted", f"sequence {j}: cluster {hit.index(False)} received no token"
    return "proved", ""


def _final_distances(ctx, con, model, states):
    """(max over tokens of the sup-distance to the nearest target, as text; first refutation or "").
    The layers after the line layer run from the ``states`` already computed."""
    ds = con.dataset
    away = ""
    with ctx.scope():
        worst = ctx.zero
        for j, (Zj, Y) in enumerate(zip(states, ds.targets)):
            for t, z in enumerate(_columns(forward(ctx, model, Zj, start=con.stages["line"]))):
                dist = None
                for y in Y:
                    dd = ctx.zero
                    for a, b in zip(z, y):
                        dd = ctx.max(dd, ctx.abs(a - ctx.convert(b)))
                    dist = dd if dist is None else ctx.min(dist, dd)
                worst = ctx.max(worst, dist)
                if not away and ctx.lt(ctx.zero, dist):
                    away = f"sequence {j} token {t} is certainly not on a target (distance {ctx.to_str(dist, 8)})"
        return ctx.to_str(worst, 10), away


def certify_softmax(con, prec: int = 256, max_prec: int = 4096, model: Transformer | None = None, progress=None):
    """Ball part + exact part; returns ``(claims, exact, info)``.  Precision doubles while the ball
    part cannot place some token (up to ``max_prec``).  ``progress(label)`` names each step."""
    say = progress or (lambda label: None)
    model = con.model if model is None else model
    if model is not con.model:
        con = al.Construction(**{**con.__dict__, "model": model})
    p = prec
    while True:
        ctx = BallContext(p)
        say(f"line layer in balls at {p} bits")
        states = _line_states(ctx, con, model)
        say(f"placing tokens at {p} bits")
        status, problem = _place_tokens(ctx, con, states)
        if status != "undecided" or p * 2 > max_prec:
            break
        p *= 2
    placed = status == "proved"
    say("segments, exactly")
    seg_ok, seg_note = _segments_exact(con)
    # the plain ball evaluation to the end: radius > 0 on snapped tokens (the dependency problem),
    # but it can refute: a token certainly away from every target of its sequence
    say("plain ball evaluation to the end")
    worst, away = _final_distances(ctx, con, model, states)
    exact = placed and seg_ok
    holds = {"proved": True, "refuted": False, "undecided": None}
    cl = [
        conclude(CLAIMS["X1"], holds[status], "ball", p, problem),
        conclude(CLAIMS["X2"], seg_ok, "exact", None, seg_note),
        conclude(CLAIMS["I1"], True if exact else (False if away else None), "ball+exact", p,
                 f"for refutation only, a plain ball evaluation to the end (wide by the dependency problem, not an "
                 f"error: X1 and X2 are the proof): max distance to the nearest target {worst}"
                 + (f"; {away}" if away else ""), "output set of every sequence equals its target set (X1 and X2)"),
    ]
    cl += al.size_claims(con)
    return cl, exact, {"prec": p, "tau": str(con.notes["tau"]), "final_ball_distance": worst}
