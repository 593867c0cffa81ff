"""Exact sequence interpolation [AFZ25]: the hardmax construction (docs/alcalde.md, The construction) and its claims.

A. Alcalde, G. Fantuzzi, E. Zuazua, *Exact Sequence Interpolation with Transformers*,
arXiv:2502.02270.  Every weight is an exact rational chosen from the data; the model is a
:class:`~symbounds.core.transformer.Transformer` with ``input="tokens"`` (a sequence's tokens are the
columns), no embedding and no readout; block ``l`` is a feed-forward layer then self-attention.

Paper symbols and code names
============================
==================  ====================  ======================================================
paper               code                  meaning
==================  ====================  ======================================================
``X^j, Y^j``        ``ds.inputs[j]``,     input tokens and target points of sequence ``j``
                    ``ds.targets[j]``
``n_j, m_j``        ``ds.n[j], ds.m[j]``  lengths; ``M = sum_j m_j``
``eta``, ``rho``    ``FeedForward.skip``, skip weights of the FF and SA layers
                    ``Attention.skip``
``A = v v^T``       ``Head(W_Q=(v,), W_K=(v,))``  rank-one attention (separation)
``A = I``           ``W_Q = W_K = I``     the collapse (Lemmas 4.2, 4.3)
``x^j`` (leaders)   ``leaders[j]``        ``(A0 + j+1, B0 + (j+1)^2, B0, .., B0)``, beyond the box
``S_R``             ``sphere[j]``         integer points ``(-a, -b, 0, .., 0)`` with ``a^2 + b^2 = R^2``
``K``               ``K``                 separation blocks, ``0 <= K <= N - 1``
==================  ====================  ======================================================

Stages (docs/alcalde.md, The four stages), all in an *integer frame* ``z = D x + t`` set up by the first FF layer
(``eta = D`` the common denominator of the inputs, ``t`` a translation making every coordinate
``>= 1``):

1. **Separation** (``K`` blocks).  Groups of sequences: different groups share no point, inside a
   group the original sharing pattern holds.  While a sequence ``j`` owns fewer than ``m_j`` private
   points, push a point ``p`` lying in some but not all sequences of ``j``'s group to ``p + R v``
   (a hat move, beyond every ``v``-value); then SA with ``A = v v^T``, ``V = gamma I``, ``rho = 1``
   adds to every token ``gamma`` times its sequence's unique ``v``-maximum (all ``v.x > 0``, so the
   hardmax picks the maximum of ``v.x_l``), ``gamma`` the least positive integer that creates no
   accidental coincidence.  The group splits, so ``K <= N - 1``.
2. **Leader selection** (``M`` blocks): one hat move per chosen private point, the leader of ``j``
   to ``leaders[j]``, the others to ``sphere[j]``; the SA of these blocks is the identity
   (``V = 0``, ``rho = 1``) except the last, which is
3. **the collapse**: hardmax SA with ``A = I``, ``V = I``, ``rho = 0``.  A box token ``x`` has
   ``<x, L_j> >= B0 sum_k x_k > |x| |x_l|`` for every box token ``x_l``; sphere points score
   negatively against positive tokens, and each is its own unique maximiser (strict Cauchy-Schwarz).
4. **Interpolation**: ``plain``, one hat per collapsed point (``M`` blocks), ``L = K + 2M``;
   ``compressed``, four ramp units per layer (each collapsed point is *exposed*: the strict maximum
   of ``<u, .>`` over the cloud), ``L = K + M + ceil(M/4)``.

Primitives: hat ``x + Delta max(0, 1 - |<w,x> - s|/eps)`` = three ReLU units
``(sigma(t-s+eps) - 2 sigma(t-s) + sigma(t-s-eps))/eps``; translation = a unit with zero row and
bias 1; ramp ``x + Delta sigma(<u,x> - theta)/(<u,p> - theta)``.  Every hidden unit is finally
rescaled by a power of two (:func:`balance`, exact, same function) to keep ``||theta*||^2`` small.

Checks (:func:`verify`): the model is evaluated from the raw inputs, by the fast exact evaluator
(:mod:`.evaluate`) or by :func:`symbounds.core.transformer.forward` in exact rationals, and the
state after each stage is compared with what the stage promises (claims ``S1``-``S3``), the output
sets with the targets (``I1``), the block count and width with the paper (``B1``-``B3``).
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, field, replace
from fractions import Fraction

from ...core.claims import decide
from ...core.contexts import ExactContext
from ...core.transformer import Attention, FeedForward, Head, Transformer, forward
from .claims import CLAIMS
from .dataset import Dataset

__all__ = ["Construction", "ConstructionError", "build", "build_core", "verify", "evaluate_sets", "balance",
           "sphere_points", "paper_blocks", "sizes", "size_claims", "theta_norm_sq", "max_bits", "width"]


class ConstructionError(RuntimeError):
    """An internal invariant of the construction failed (a bug, never a property of the data)."""


@dataclass
class Construction:
    dataset: Dataset
    model: Transformer
    variant: str
    K: int
    scale: int  # D of the integer frame z = D x + t
    shift: tuple  # t
    stages: dict  # stage name -> index of the layer whose *input* is the state after that stage
    chosen: list  # chosen[j]: the m_j private points of sequence j, as they are after separation
    #             (in the input frame when K = 0, else in the integer frame)
    leaders: list  # leaders[j]
    sphere: list  # sphere[j]: m_j - 1 points
    assignment: list  # assignment[j]: {collapsed point: target point}
    gammas: list = field(default_factory=list)
    attention: str = "hardmax"
    notes: dict = field(default_factory=dict)

    @property
    def blocks(self) -> int:
        return len(self.model.layers) // 2


# ------------------------------------------------------------------------------------------
# small exact helpers


def dot(a, b):
    """The scalar product ``<a, b> = sum_i a_i b_i`` of two exact vectors."""
    return sum(x * y for x, y in zip(a, b))


def _add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def sub(a, b):
    """The difference ``a - b`` of two exact vectors, as a tuple."""
    return tuple(x - y for x, y in zip(a, b))


def _scale(c, a):
    return tuple(c * x for x in a)


def _eye(d):
    return tuple(tuple(1 if i == k else 0 for k in range(d)) for i in range(d))


def _zeros(r, c):
    return tuple(tuple(0 for _ in range(c)) for _ in range(r))


class _Frame:
    """The affine map ``z = eta x + shift`` from a layer's input to the integer frame (the first
    layer rescales; every later layer already works in the integer frame)."""

    def __init__(self, eta, shift):
        self.eta = eta
        self.shift = shift


def _ff_layer(d: int, frame: _Frame, units: list) -> FeedForward:
    """``FF(x) = eta x + sum_u out_u sigma(<w_u, z(x)> + c_u)`` (+ the frame's translation).

    ``units``: ``(w, c, out)`` in the integer frame; a unit reads ``<w, z> = eta <w, x> + <w, shift>``.
    """
    rows, b1, cols = [], [], []
    if any(frame.shift):
        units = units + [((0,) * d, 1, frame.shift)]  # P2: sigma(1) = 1 adds the translation
    if len(units) > 4:
        raise ConstructionError("more than 4 hidden units in one layer")
    for w, c, out in units:
        rows.append(tuple(frame.eta * wi for wi in w))
        b1.append(Fraction(c) + dot(w, frame.shift))
        cols.append(out)
    if not units:  # an identity layer still needs one (silent) hidden unit
        rows, b1, cols = [(0,) * d], [0], [(0,) * d]
    W2 = tuple(tuple(Fraction(cols[u][r]) for u in range(len(cols))) for r in range(d))
    return FeedForward(tuple(rows), tuple(b1), W2, (0,) * d, frame.eta)


def _hat_units(w, s, eps, delta) -> list:
    """Three ReLU units adding ``delta * max(0, 1 - |<w,z> - s| / eps)``."""
    return [(w, -s + eps, _scale(Fraction(1, eps), delta)),
            (w, -s, _scale(Fraction(-2, eps), delta)),
            (w, -s - eps, _scale(Fraction(1, eps), delta))]


def identity_attention(d: int, kind: str = "hardmax") -> Attention:
    """``V = 0``, ``rho = 1``: the SA of a block that should not attend."""
    return Attention((Head(_zeros(1, d), _zeros(1, d), _zeros(1, d), _zeros(d, 1)),), kind, 1)


def separation_attention(d: int, v, gamma: int, kind: str = "hardmax") -> Attention:
    """``A = v v^T``, ``V = gamma I``, ``rho = 1``."""
    gI = tuple(tuple(gamma if i == k else 0 for k in range(d)) for i in range(d))
    return Attention((Head((tuple(v),), (tuple(v),), gI, _eye(d)),), kind, 1)


def collapse_attention(d: int, kind: str = "hardmax") -> Attention:
    """``A = I``, ``V = I``, ``rho = 0`` (Lemmas 4.2 and 4.3)."""
    return Attention((Head(_eye(d), _eye(d), _eye(d), _eye(d)),), kind, 0)


# ------------------------------------------------------------------------------------------
# the cloud: distinct points of all sequences, with their owners


class _Cloud:
    def __init__(self, seqs: list):
        self.seqs = seqs  # seqs[j]: list of points (integer frame)
        self.reindex()

    def reindex(self):
        owners: dict = {}
        for j, X in enumerate(self.seqs):
            for x in X:
                owners.setdefault(x, set()).add(j)
        self.owners = owners

    def private(self, j) -> list:
        return [x for x in self.seqs[j] if len(self.owners[x]) == 1]

    def move(self, p, q):
        """A token-wise move p -> q of every copy of p (q must be a new point)."""
        if q in self.owners:
            raise ConstructionError("a move landed on an existing point")
        own = self.owners.pop(p)
        self.owners[q] = own
        for j in own:
            X = self.seqs[j]
            X[X.index(p)] = q


class _Projector:
    """Projections of the cloud on a direction ``w``, kept sorted, to find hat gaps quickly."""

    def __init__(self, cloud: _Cloud, rng: random.Random, d: int):
        self.cloud, self.rng, self.d = cloud, rng, d
        self.w = None

    def _reset(self):
        self.w = tuple(self.rng.randint(1, 2**20) * self.rng.choice((1, -1)) for _ in range(self.d))
        self.proj: dict = {}
        for x in self.cloud.owners:
            s = dot(self.w, x)
            self.proj[s] = self.proj.get(s, 0) + 1
        self.sorted = sorted(self.proj)

    def hat(self, p, q) -> list:
        """Hat units moving p to q and fixing every other point of the cloud."""
        if self.w is None:
            self._reset()
        for _ in range(50):
            s = dot(self.w, p)
            if self.proj.get(s) == 1:
                break
            self._reset()
        else:
            raise ConstructionError("no direction separates the point")
        i = bisect.bisect_left(self.sorted, s)
        gaps = []
        if i > 0:
            gaps.append(s - self.sorted[i - 1])
        if i + 1 < len(self.sorted):
            gaps.append(self.sorted[i + 1] - s)
        eps = min(gaps) if gaps else 1
        units = _hat_units(self.w, s, eps, sub(q, p))
        # bookkeeping: p leaves, q arrives
        self.sorted.pop(i)
        del self.proj[s]
        t = dot(self.w, q)
        if t in self.proj:
            self.proj[t] += 1
        else:
            self.proj[t] = 1
            bisect.insort(self.sorted, t)
        return units

    def invalidate(self):
        self.w = None


# ------------------------------------------------------------------------------------------
# sphere points with integer coordinates


_PRIMES_1MOD4 = [5, 13, 17, 29, 37, 41, 53, 61, 73, 89, 97, 101, 109, 113]


def _two_squares(p: int) -> tuple:
    for a in range(1, math.isqrt(p) + 1):
        b = math.isqrt(p - a * a)
        if b * b == p - a * a:
            return a, b
    raise ValueError(p)


def sphere_points(count: int) -> tuple[int, list]:
    """``(R0, points)``: at least ``count`` distinct pairs ``(a, b)``, ``a, b > 0``, ``a^2 + b^2 = R0^2``.

    ``R0`` is a product of primes ``p = 1 (mod 4)``; every choice of ``pi^2, p, conj(pi)^2`` per
    prime (``pi`` a Gaussian prime over ``p``) gives a Gaussian integer of norm ``R0^2``.
    """
    if count <= 0:
        return 1, []
    k = 1
    while True:
        ints = [(1, 0)]
        for p in _PRIMES_1MOD4[:k]:
            a, b = _two_squares(p)
            choices = [(a * a - b * b, 2 * a * b), (p, 0), (a * a - b * b, -2 * a * b)]
            ints = [(x * c - y * e, x * e + y * c) for (x, y) in ints for (c, e) in choices]
        R0 = math.prod(_PRIMES_1MOD4[:k])
        pts = sorted({(abs(x), abs(y)) for x, y in ints if x != 0 and y != 0}
                     | {(abs(y), abs(x)) for x, y in ints if x != 0 and y != 0})
        if len(pts) >= count:
            assert all(a * a + b * b == R0 * R0 for a, b in pts)
            return R0, pts[:count]
        k += 1


# ------------------------------------------------------------------------------------------
# the construction


def _integer_frame(ds: Dataset):
    D = 1
    for X in ds.inputs:
        for x in X:
            for v in x:
                D = math.lcm(D, v.denominator)
    mins = [min(int(v * D) for X in ds.inputs for x in X for v in (x[k],)) for k in range(ds.d)]
    shift = tuple(1 - m for m in mins)
    seqs = [[tuple(int(v * D) + t for v, t in zip(x, shift)) for x in X] for X in ds.inputs]
    return D, shift, seqs


def _choose_v(seqs, rng, d):
    def ok(v):
        for X in seqs:
            vals = [dot(v, x) for x in X]
            top = max(vals)
            if vals.count(top) != 1:
                return False
        return True

    for _ in range(20):
        v = tuple(rng.randint(1, 2**8) for _ in range(d))
        if ok(v):
            return v
    spread = max(max(x) for X in seqs for x in X)
    omega = spread + 2  # moment curve: every coordinate difference is below omega
    return tuple(omega**k for k in range(d))


def _separate(cloud: _Cloud, ds: Dataset, rng, d, first_frame):
    """Separation blocks; returns (layers, gammas)."""
    seqs = cloud.seqs
    N = len(seqs)
    group = [0] * N  # group id of each sequence
    layers, gammas = [], []
    v = None
    proj = _Projector(cloud, rng, d)
    frame = first_frame
    while True:
        need = [j for j in range(N) if len(cloud.private(j)) < ds.m[j]]
        if not need:
            break
        if v is None:
            v = _choose_v(seqs, rng, d)
        j = need[0]
        G = [k for k in range(N) if group[k] == group[j] and k != j]
        Sj = set(seqs[j])
        k = next((k for k in G if Sj & set(seqs[k])), None)
        if k is None:
            raise ConstructionError(f"sequence {j} needs private points but shares nothing in its group")
        diff = [x for x in seqs[j] if x not in set(seqs[k])] or [x for x in seqs[k] if x not in Sj]
        p = diff[0]
        vmax = max(dot(v, x) for x in cloud.owners)
        vv = dot(v, v)
        R = (vmax - dot(v, p)) // vv + 1
        q = _add(p, _scale(R, v))
        ff = _ff_layer(d, frame, proj.hat(p, q))
        frame = _Frame(1, (0,) * d)
        cloud.move(p, q)
        # SA: every token + gamma * (its sequence's v-maximum)
        tops = [max(X, key=lambda x: dot(v, x)) for X in seqs]
        gamma = 1
        while True:
            new = [[_add(x, _scale(gamma, tops[j2])) for x in X] for j2, X in enumerate(seqs)]
            seen: dict = {}
            clash = False
            for j2, X in enumerate(new):
                for x in X:
                    t = seen.setdefault(x, tops[j2])
                    if t != tops[j2]:
                        clash = True
                        break
                if clash:
                    break
            if not clash:
                break
            gamma += 1
        layers += [ff, separation_attention(d, v, gamma)]
        gammas.append(gamma)
        cloud.seqs[:] = new
        cloud.reindex()
        proj.invalidate()
        ids: dict = {}
        group = [ids.setdefault(tops[j2], len(ids)) for j2 in range(N)]
    return layers, gammas, frame


def _frac_ceil(x: Fraction) -> int:
    return -((-x.numerator) // x.denominator)


def build_core(ds: Dataset, rng: random.Random):
    """Separation, leader selection and the collapse (shared by every variant).

    Returns ``(layers, frame, partial Construction fields)``; the layers are hardmax.
    """
    d, N = ds.d, ds.N
    D, shift, seqs = _integer_frame(ds)
    cloud = _Cloud(seqs)
    frame = _Frame(D, shift)
    layers, gammas, frame = _separate(cloud, ds, rng, d, frame)
    K = len(gammas)
    stages = {"separation": len(layers)}

    # --- leader selection ------------------------------------------------------------------
    chosen = [cloud.private(j)[: ds.m[j]] for j in range(N)]
    if K == 0:  # the state after separation is the raw input: chosen points in the input frame
        chosen = [[tuple(Fraction(z - t, D) for z, t in zip(p, shift)) for p in pts] for pts in chosen]
        to_int = {p: tuple(int(v * D) + t for v, t in zip(p, shift)) for pts in chosen for p in pts}
    else:
        to_int = {p: p for pts in chosen for p in pts}
    box2 = max(dot(x, x) for x in cloud.owners)
    Bn = math.isqrt(box2) + 1  # every box token has norm < Bn
    Y = max(_frac_ceil(abs(v)) for Yj in ds.targets for y in Yj for v in y) + 1  # |y_k| < Y coordinatewise
    Ynorm = Y * math.isqrt(d) + Y  # > |y| for every target
    n_sphere = ds.M - N
    R0, pairs = sphere_points(n_sphere)
    c = max(Bn, Ynorm) // R0 + 1
    Rs = c * R0  # sphere radius: Rs > box norms and > every target norm
    B0 = max(Bn, Ynorm) + 1
    A0 = B0 + Rs + (2 * N + 1) * Ynorm
    leaders = [tuple([A0 + j + 1, B0 + (j + 1) ** 2] + [B0] * (d - 2)) for j in range(N)]
    sphere, it = [], iter(pairs)
    for j in range(N):
        pts = []
        for _ in range(ds.m[j] - 1):
            a, b = next(it)
            pts.append(tuple([-c * a, -c * b] + [0] * (d - 2)))
        sphere.append(pts)
    proj = _Projector(cloud, rng, d)
    moves = [(to_int[chosen[j][0]], leaders[j]) for j in range(N)]
    moves += [(to_int[chosen[j][k + 1]], sphere[j][k]) for j in range(N) for k in range(ds.m[j] - 1)]
    for i, (p, q) in enumerate(moves):
        ff = _ff_layer(d, frame, proj.hat(p, q))
        frame = _Frame(1, (0,) * d)
        cloud.move(p, q)
        last = i == len(moves) - 1
        if last:
            stages["leaders"] = len(layers) + 1
        layers += [ff, collapse_attention(d) if last else identity_attention(d)]
    stages["collapse"] = len(layers)

    return layers, frame, dict(K=K, scale=D, shift=shift, stages=stages, chosen=chosen, leaders=leaders,
                               sphere=sphere, gammas=gammas)


def build(ds: Dataset, variant: str = "plain", seed: int = 0) -> Construction:
    """The hardmax Transformer interpolating ``ds`` (docs/alcalde.md, The construction), every weight an exact rational."""
    if variant not in ("plain", "compressed"):
        raise ValueError(f"unknown variant {variant!r} (use plain or compressed)")
    rng = random.Random(seed)
    d, N = ds.d, ds.N
    layers, frame, f = build_core(ds, rng)
    leaders, sphere, stages = f["leaders"], f["sphere"], f["stages"]

    # --- interpolation -----------------------------------------------------------------------
    assignment = []
    collapsed = []  # (point, target)
    for j in range(N):
        pts = [leaders[j]] + sphere[j]
        assignment.append(dict(zip(pts, ds.targets[j])))
        collapsed += list(zip(pts, ds.targets[j]))
    cur = {p: None for p, _ in collapsed}  # the current cloud (dict as an ordered set)
    if variant == "plain":
        for p, y in collapsed:
            units = _hat_for(cur, p, y, rng, d)
            _relocate(cur, p, y)
            layers += [_ff_layer(d, frame, units), identity_attention(d)]
    else:
        exposers = {leaders[j]: (2 * (j + 1), -1) + (0,) * (d - 2) for j in range(N)}
        for j in range(N):
            for s in sphere[j]:
                exposers[s] = s
        for b in range(0, len(collapsed), 4):
            batch = collapsed[b:b + 4]
            units = []
            for p, y in batch:
                u = exposers[p]
                top = dot(u, p)
                theta = max((dot(u, q) for q in cur if q != p), default=top - 1)
                if not top > theta:
                    raise ConstructionError("a collapsed point is not exposed")
                units.append((u, -theta, _scale(Fraction(1, top - theta), sub(y, p))))
            for p, y in batch:
                _relocate(cur, p, y)
            layers += [_ff_layer(d, frame, units), identity_attention(d)]
    stages["final"] = len(layers)
    model = Transformer(tuple(balance(layer) for layer in layers), None, None, "tokens")
    return Construction(ds, model, variant, f["K"], f["scale"], f["shift"], stages, f["chosen"], leaders, sphere,
                        assignment, f["gammas"])


def _log2(q: Fraction) -> int:
    """About log2 of a positive rational, from bit lengths (exact integers, no floats)."""
    return q.numerator.bit_length() - q.denominator.bit_length()


def balance(layer):
    """Rescale each hidden unit of a feed-forward layer by a power of two ``c``:
    ``(w, b, W2[:, k]) -> (c w, c b, W2[:, k] / c)``.  Since ``sigma(c t) = c sigma(t)`` for
    ``c > 0`` the layer computes the same function; ``c^4 ~ |W2[:, k]|^2 / |(w, b)|^2`` roughly
    minimises the unit's share of ``||theta||^2`` (it makes the two halves equal)."""
    if not isinstance(layer, FeedForward):
        return layer
    W1, b1, W2 = [list(r) for r in layer.W1], list(layer.b1), [list(r) for r in layer.W2]
    for k in range(len(W1)):
        r2 = sum((Fraction(v) ** 2 for v in W1[k]), Fraction(0)) + Fraction(b1[k]) ** 2
        o2 = sum((Fraction(W2[r][k]) ** 2 for r in range(len(W2))), Fraction(0))
        if r2 == 0 or o2 == 0:
            continue
        e = (_log2(o2 / r2) + 2) // 4  # nearest integer to log2(o2/r2)/4
        c = Fraction(2) ** e
        W1[k] = [c * Fraction(v) for v in W1[k]]
        b1[k] = c * Fraction(b1[k])
        for r in range(len(W2)):
            W2[r][k] = Fraction(W2[r][k]) / c
    return replace(layer, W1=tuple(tuple(r) for r in W1), b1=tuple(b1), W2=tuple(tuple(r) for r in W2))


def _relocate(cur: dict, p, y):
    del cur[p]
    cur[y] = None


def _hat_for(cur: dict, p, y, rng, d) -> list:
    """A hat moving p to y that fixes every other point of the (small) current cloud."""
    others = [q for q in cur if q != p]
    for attempt in range(100):
        w = tuple(rng.randint(-2**12, 2**12) for _ in range(d)) if attempt else (1,) + (0,) * (d - 1)
        s = dot(w, p)
        gaps = [abs(dot(w, q) - s) for q in others]
        if all(g != 0 for g in gaps):
            return _hat_units(w, s, min(gaps, default=1), sub(y, p))
    raise ConstructionError("no direction separates the point")


# ------------------------------------------------------------------------------------------
# sizes


def paper_blocks(ds: Dataset, attention: str = "hardmax") -> int:
    """The paper's block counts (docs/alcalde.md, Counts): ``2M + 2N + 1`` (hardmax), ``2M + 3N`` (softmax)."""
    return 2 * ds.M + 2 * ds.N + 1 if attention == "hardmax" else 2 * ds.M + 3 * ds.N


def theta_norm_sq(model: Transformer) -> Fraction:
    """``||theta*||^2``: the sum of squares of every weight and bias (skip weights are part of the
    architecture, as in :meth:`Transformer.count_parameters`)."""
    return sum((Fraction(v) ** 2 for v in model.weights()), Fraction(0))


def max_bits(model: Transformer) -> tuple[int, int]:
    """Largest bit size of a numerator and of a denominator over all parameters."""
    num = den = 0
    for v in model.weights():
        f = Fraction(v)
        num = max(num, abs(f.numerator).bit_length())
        den = max(den, f.denominator.bit_length())
    return num, den


def width(model: Transformer) -> int:
    return max(len(layer.W1) for layer in model.layers if isinstance(layer, FeedForward))


def sizes(con: Construction) -> dict:
    ds, model = con.dataset, con.model
    dense, nonzero = model.count_parameters()
    nb, db = max_bits(model)
    distinct_tokens = len({x for X in ds.inputs for x in X})
    return {
        "blocks": con.blocks,
        "blocks_formula": {
            "paper": paper_blocks(ds, con.attention),
            "paper_text": "2M + 2N + 1" if con.attention == "hardmax" else "2M + 3N",
            "construction_text": {"plain": "K + 2M", "compressed": "K + M + ceil(M/4)",
                                  "softmax": "K + 2M + 1"}[con.variant],
            "K": con.K, "M": ds.M, "N": ds.N,
        },
        "width": width(model),
        "params_dense": dense,
        "params_nonzero": nonzero,
        "params_bound": (10 * ds.d + 8) * con.blocks,  # the (10d + 8) L of docs/alcalde.md, Counts, for the nonzero count
        "max_numerator_bits": nb,
        "max_denominator_bits": db,
        "resnet_blocks": distinct_tokens,
        "resnet_note": "a token-wise network moves every distinct input token by its own hat: "
                       f"{distinct_tokens} blocks of width 3, growing with sum_j n_j",
    }


# ------------------------------------------------------------------------------------------
# exact verification


def _key(v):
    """An fmpq as a hashable exact number (int when integral; ints and Fractions hash alike)."""
    return int(v.p) if v.q == 1 else Fraction(int(v.p), int(v.q))


def _rowsets(state) -> tuple[list, dict]:
    """(rows of a sequence state as tuples, multiplicity of each distinct row)."""
    e = state.X.entries()
    c = state.X.ncols()
    keys = [_key(v) for v in e]
    rows = [tuple(keys[i * c:(i + 1) * c]) for i in range(state.X.nrows())]
    mult: dict = {}
    for r, k in zip(rows, state.counts):
        mult[r] = mult.get(r, 0) + k
    return rows, mult


_EXACT = ExactContext()


def _count_claim(cid: str, failing: list, total: int, note: str = "", statement: str | None = None):
    """Claim ``cid`` (relation: the number of failing sequences is exactly 0), decided exactly."""
    claim = CLAIMS[cid] if statement is None else CLAIMS[cid].stated(statement)
    first = f"first failure: sequence {failing[0]}" if failing else ""
    m = claim.measured(_EXACT.convert(len(failing)), note="; ".join(t for t in (first, note) if t))
    r = decide(_EXACT, m)
    r.lhs, r.rhs = f"{len(failing)} of {total} sequences fail", "0"
    return r


def _le_claim(cid: str, lhs: int, rhs: int, statement: str | None = None):
    claim = CLAIMS[cid] if statement is None else CLAIMS[cid].stated(statement)
    return decide(_EXACT, claim.measured(_EXACT.convert(lhs), _EXACT.convert(rhs)))


def evaluate_sets(model: Transformer, ds: Dataset, checkpoints=(), evaluator: str = "fast"):
    """``(final multisets, {layer: multisets})``: each a list over sequences of ``{row: multiplicity}``.

    ``evaluator="generic"`` runs :func:`symbounds.core.transformer.forward` in
    :class:`~symbounds.core.contexts.ExactContext` on each sequence's ``d x n_j`` matrix (tokens as
    columns); ``"fast"`` runs :mod:`.evaluate` (same semantics, FLINT matrices).
    """
    if evaluator == "fast":
        from .evaluate import evaluate

        final, snaps = evaluate(model, ds.inputs, checkpoints)
        conv = lambda states: [_rowsets(s)[1] for s in states]
        return conv(final), {i: conv(s) for i, s in snaps.items()}
    if evaluator != "generic":
        raise ValueError(f"unknown evaluator {evaluator!r}")
    ctx = ExactContext()
    finals, snaps = [], {i: [] for i in checkpoints}
    for X in ds.inputs:
        cols = [[x[k] for x in X] for k in range(ds.d)]
        _, tr = forward(ctx, model, cols, trace=True)
        for i in list(snaps) + [None]:
            Z = tr.Z[-1] if i is None else tr.Z[i]
            mult: dict = {}
            for t in range(len(Z[0])):
                r = tuple(_key(Z[k][t]) for k in range(ds.d))
                mult[r] = mult.get(r, 0) + 1
            (finals if i is None else snaps[i]).append(mult)
    return finals, snaps


def verify(con: Construction, model: Transformer | None = None, evaluator: str = "fast") -> tuple[list, bool]:
    """Evaluate ``model`` (default: the built one) exactly on every sequence and check each stage.

    Returns ``(claims, exact)`` with ``exact`` true when every output set equals its target set.
    """
    ds = con.dataset
    model = con.model if model is None else model
    st = con.stages
    final, snaps = evaluate_sets(model, ds, (st["separation"], st["leaders"], st["collapse"]), evaluator)
    claims = [
        _check_separation(con, snaps[st["separation"]]),
        _check_leaders(con, snaps[st["leaders"]]),
        _check_collapse(con, snaps[st["collapse"]]),
    ]
    bad = [j for j in range(ds.N) if set(final[j]) != set(ds.targets[j])]
    claims.append(_count_claim("I1", bad, ds.N))
    claims += size_claims(con)
    return claims, not bad


def _owners(sets: list) -> dict:
    own: dict = {}
    for j, s in enumerate(sets):
        for r in s:
            own[r] = own.get(r, 0) + 1
    return own


def _check_separation(con, sets):
    own = _owners(sets)
    bad = [j for j, pts in enumerate(con.chosen) if any(sets[j].get(p) != 1 or own[p] != 1 for p in pts)]
    shared = sum(1 for c in own.values() if c > 1)
    return _count_claim(
        "S1", bad, len(sets), f"{shared} points still shared (attention acts within a sequence, so unused shared "
        "tokens may stay)",
        f"after separation (K = {con.K} blocks) each sequence owns its m_j chosen tokens privately")


def _check_leaders(con, sets):
    own = _owners(sets)
    bad = [j for j in range(len(sets))
           if any(sets[j].get(p) != 1 or own.get(p) != 1 for p in [con.leaders[j]] + con.sphere[j])]
    return _count_claim("S2", bad, len(sets))


def _check_collapse(con, sets):
    bad = [j for j in range(len(sets)) if set(sets[j]) != {con.leaders[j], *con.sphere[j]}]
    return _count_claim("S3", bad, len(sets))


def size_claims(con: Construction) -> list:
    ds = con.dataset
    L, paper = con.blocks, paper_blocks(ds, con.attention)
    w = width(con.model)
    hard = con.attention == "hardmax"
    target = 2 * ds.M + ds.N - 1 if hard else 2 * ds.M + ds.N
    return [
        _le_claim("B1", L, paper, "blocks L <= the paper's " + ("2M + 2N + 1" if hard else "2M + 3N")),
        _le_claim("B2", L, target, "blocks L <= " + ("2M + N - 1" if hard else "2M + N") + " (this construction)"),
        _le_claim("B3", w, 4),
    ]
