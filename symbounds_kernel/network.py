"""The network of a model file (``symbounds-transformer/1``) and its enclosure over a box.

``Z_0 = base + E x e_c^T`` (tokens are columns); attention ``rho Z + sum_h W_O V pi^T`` with
``V = W_V Z``, ``pi = softmax`` (or hardmax) of the rows of ``(W_Q Z)^T (W_K Z) / tau``;
feed-forward, token by token, ``eta z + W2 relu(W1 z + b1) + b2``; the output is ``Z_L[row, col]``.

Two exact rewritings keep the enclosure tight, both identities:

* **affine stage**: while every score is independent of ``x`` (``W_Q B = W_K B = 0`` exactly for
  the ``x``-parts ``B`` of the tokens), ``Z = A + sum_i x_i B_i`` stays affine and its layers are
  evaluated once, in balls, for the whole domain;
* **ReLU pairs**: units ``k, k'`` with ``W1_k' = -W1_k``, ``b1_k' = -b1_k`` use
  ``relu(-u) = relu(u) - u``, so ``a relu(u) + b relu(-u) = (a + b) relu(u) - b u``.

Every later layer is evaluated on first-order Taylor models (:mod:`.taylor`) over the box; a
softmax row is shifted by one linear function ``ell(delta)`` (softmax is unchanged by it) so that
the rows' dominant scores have small linear parts.  After the last attention layer only the output
column is computed.
"""

from fractions import Fraction

from flint import arb, arb_mat

from . import hull, taylor as tm
from .affine import affine_softmax
from .tail import Tail
from .read import Rejected, number


def _ball(q: Fraction) -> arb:
    return arb(q.numerator) / q.denominator


def _matrix(obj, what, rows=None, cols=None):
    if not isinstance(obj, list) or not obj or not all(isinstance(r, list) and r for r in obj):
        raise Rejected(f"model: {what} is not a non-empty list of rows")
    if len({len(r) for r in obj}) != 1 or (rows is not None and len(obj) != rows) or (
            cols is not None and len(obj[0]) != cols):
        raise Rejected(f"model: {what} has the wrong shape")
    return [[number(v, f"model: {what}") for v in r] for r in obj]


def _index(v, what, limit):
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < limit:
        raise Rejected(f"model: {what} is not an integer in [0, {limit})")
    return v


def _sparse(rows):
    """Each row as ``[(column, ball)]`` of its non-zero entries."""
    return [[(j, _ball(v)) for j, v in enumerate(r) if v] for r in rows]


def _pairs(W1, b1, W2, skip):
    """The ReLU-pair rewriting: ``(L, l, W1', b1', W2')`` with
    ``eta z + W2 relu(W1 z + b1) + b2 = L z + l + W2' relu(W1' z + b1') + b2``."""
    D, units = len(W2), list(range(len(W1)))
    L = [[skip if r == c else Fraction(0) for c in range(D)] for r in range(D)]
    l, W2 = [Fraction(0)] * D, [list(r) for r in W2]
    for k in list(units):
        for k2 in units:
            if k2 != k and k in units and all(a == -b for a, b in zip(W1[k], W1[k2])) and b1[k] == -b1[k2]:
                for r in range(D):
                    b = W2[r][k2]
                    W2[r][k] += b
                    L[r] = [x - b * w for x, w in zip(L[r], W1[k])]
                    l[r] -= b * b1[k]
                units.remove(k2)
                break
    return L, l, [W1[k] for k in units], [b1[k] for k in units], [[r[k] for k in units] for r in W2]


def parse_model(m, d: int):
    """The layers of a vector-input model with ``d`` inputs and a readout, weights exact."""
    if not isinstance(m, dict) or m.get("format") != "symbounds-transformer/1" or m.get("input") != "vector":
        raise Rejected("model: not a vector-input model of format 'symbounds-transformer/1'")
    e, out = m.get("embedding"), m.get("readout")
    if not isinstance(e, dict) or not isinstance(out, dict) or not isinstance(m.get("layers"), list):
        raise Rejected("model: needs 'embedding', 'layers' and 'readout'")
    base = _matrix(e.get("base"), "embedding.base")
    D, n = len(base), len(base[0])
    E = _matrix(e.get("E"), "embedding.E", D, d)
    col = _index(e.get("column"), "embedding.column", n)
    layers = []
    for i, L in enumerate(m["layers"]):
        if not isinstance(L, dict):
            raise Rejected(f"model: layers[{i}] is not an object")
        skip = number(L.get("skip", "0"), f"model: layers[{i}].skip")
        if L.get("type") == "attention" and L.get("kind") in ("softmax", "hardmax") and L.get("heads"):
            tau = number(L["tau"], f"model: layers[{i}].tau") if "tau" in L else Fraction(1)
            if tau <= 0 or not isinstance(L["heads"], list):
                raise Rejected(f"model: layers[{i}] has a non-positive tau or no list of heads")
            heads = []
            for h, H in enumerate(L["heads"]):
                w = f"layers[{i}].heads[{h}]"
                H = H if isinstance(H, dict) else {}
                WQ = _matrix(H.get("W_Q"), w + ".W_Q", None, D)
                WK = _matrix(H.get("W_K"), w + ".W_K", len(WQ), D)
                WV = _matrix(H.get("W_V"), w + ".W_V", None, D)
                WO = _matrix(H.get("W_O"), w + ".W_O", D, len(WV))
                heads.append((WQ, WK, WV, WO))
            layers.append(("attention", L["kind"], skip, tau, heads, [[_sparse(W) for W in H] for H in heads]))
        elif L.get("type") == "ffn":
            W1 = _matrix(L.get("W1"), f"layers[{i}].W1", None, D)
            b1 = _matrix([L.get("b1")], f"layers[{i}].b1", 1, len(W1))[0]
            W2 = _matrix(L.get("W2"), f"layers[{i}].W2", D, len(W1))
            b2 = _matrix([L.get("b2")], f"layers[{i}].b2", 1, D)[0]
            Lin, l, W1, b1, W2 = _pairs(W1, b1, W2, skip)
            layers.append(("ffn", _sparse(Lin), [_ball(a + b) for a, b in zip(l, b2)], _sparse(W1),
                           [_ball(v) for v in b1], _sparse(W2)))
        else:
            raise Rejected(f"model: layers[{i}] is neither an attention nor an ffn layer")
    if not layers:
        raise Rejected("model: no layers")
    readout = (_index(out.get("row"), "readout.row", D), _index(out.get("column"), "readout.column", n))
    return base, E, col, layers, readout


def _mat(rows):
    return arb_mat([[_ball(v) for v in r] for r in rows])


def embed(base, E, col, d):
    """``Z_0 = A + sum_i x_i B_i``: ``A`` the base, ``B_i`` column ``E e_i`` at the input column."""
    n = len(base[0])
    return _mat(base), [_mat([[E[r][i] if j == col else 0 for j in range(n)] for r in range(len(base))])
                        for i in range(d)]


class Network:
    """The model with its affine stage evaluated once (``A``, ``B_i`` as lists of rows of balls)."""

    def __init__(self, model_json, d: int):
        base, E, col, self.layers, self.readout = parse_model(model_json, d)
        self.d = d
        A, B = embed(base, E, col, d)
        self.start = 0
        for layer in self.layers:
            if layer[0] != "attention" or not self._constant_scores(layer, B):
                break
            A, B = self._affine_attention(layer, A, B)
            self.start += 1
        self.A, self.B, self.Bl = A, B, [b.tolist() for b in B]
        last = [i for i, L in enumerate(self.layers) if L[0] == "attention"]
        self.last_attention = last[-1] if last else -1
        self.need = [set() for _ in self.layers] + [{self.readout[0]}]  # rows each layer must give
        for i in range(len(self.layers) - 1, self.start - 1, -1):
            self.need[i] = _reads(self.layers[i + 1], self.need[i + 1]) if i + 1 < len(self.layers) else self.need[-1]
        self.need_in = _reads(self.layers[self.start], self.need[self.start]) if self.start < len(self.layers) else {
            self.readout[0]}
        self.tail = Tail(self) if Tail.applies(self) else None

    @staticmethod
    def _constant_scores(layer, B):
        heads = layer[4]
        return all(v.is_zero() for WQ, WK, _, _ in heads for W in (WQ, WK) for b in B for v in (_mat(W) * b).entries())

    @staticmethod
    def _affine_attention(layer, A, B, record=None):
        """``rho Z + sum_h W_O W_V Z pi_h^T`` for ``Z = A + sum x_i B_i`` with constant ``pi_h``:
        ``pi_h[j, k] = e_jk / t_j``, so column ``j`` of ``W_O W_V Z e^T`` is divided by ``t_j``.
        A softmax layer goes through :func:`.affine.affine_softmax` (values of small support,
        shared normalisers); with ``record``, each head's rows ``(e_j, t_j)`` are appended to it."""
        _, kind, skip, tau, heads, _ = layer
        if kind == "softmax" and record is None:
            return affine_softmax(layer, A, B, lambda *H: _head(kind, tau, H, [A] + B))
        A2, B2 = A * _ball(skip), [b * _ball(skip) for b in B]
        for H in heads:
            parts = _head(kind, tau, H, [A] + B, record)
            A2, B2 = A2 + parts[0], [b2 + p for b2, p in zip(B2, parts[1:])]
        return A2, B2

    def enclose(self, lo, hi):
        """A ball containing ``T(x)`` for every ``x`` of the box ``[lo, hi]`` (Fractions)."""
        return tm.enclosure(*self.taylor(lo, hi))

    def taylor(self, lo, hi):
        """``(t, h)``: a Taylor model ``t`` of ``T`` over the box, in ``delta = x - centre``, ``|delta| <= h``."""
        d = self.d
        x0 = [_ball((a + b) / 2) for a, b in zip(lo, hi)]
        h = [_ball((b - a) / 2) for a, b in zip(lo, hi)]
        C = self.A
        for x, Bi in zip(x0, self.B):
            C = C + Bi * x
        cols, extra = list(range(C.ncols())), None
        if self.tail is not None:
            cols, extra = self.tail.split([_ball(a).union(_ball(b)) for a, b in zip(lo, hi)], self.readout[1])
        Z = [[tm.TM(C[r, j], [Bi[r][j] for Bi in self.Bl], arb(0)) for j in cols] if r in self.need_in else
             [None] * len(cols) for r in range(C.nrows())]
        for i in range(self.start, len(self.layers)):
            layer = self.layers[i]
            if layer[0] == "ffn":
                Z = [list(c) for c in zip(*[_ffn(layer, z, h, d, self.need[i]) for z in zip(*Z)])]
            else:
                last = i == self.last_attention
                queries = [cols.index(self.readout[1])] if last else range(len(cols))
                Z = _attention(layer, Z, queries, h, d, self.need[i], last, extra if last else None)
                if last:
                    cols = [self.readout[1]]
        return Z[self.readout[0]][cols.index(self.readout[1])], h


def _head(kind, tau, H, Z, record=None):
    """One head's ``W_O W_V M E^T / t`` for each ``M`` of ``Z`` (``Z[0]`` the constant part), every
    score of its ``n x n`` computed."""
    WQ, WK, WV, WO = H
    A = Z[0]
    S = ((_mat(WQ) * A).transpose() * (_mat(WK) * A) * (1 / _ball(tau))).tolist()
    rows = [_weights(kind, row) for row in S]
    if record is not None:
        record.append(rows)
    Et = arb_mat([e for e, _ in rows]).transpose()
    OV = _mat(WO) * _mat(WV)
    parts = [(OV * M * Et).tolist() for M in Z]
    return [arb_mat([[v / t for v, (_, t) in zip(row, rows)] for row in P]) for P in parts]


def _weights(kind, scores):
    """One row of constant attention weights as ``(e, t)``, the weights being ``e_k / t``
    (Arb's exponent range is unbounded: no shift is needed)."""
    if kind == "hardmax":
        top = [k for k, s in enumerate(scores) if all(s > t for j, t in enumerate(scores) if j != k)]
        if len(top) != 1:
            raise ArithmeticError("a hardmax row whose winner is not decided")
        return [arb(int(k == top[0])) for k in range(len(scores))], arb(1)
    e = [s.exp() for s in scores]
    return e, sum(e, arb(0))


def _reads(layer, rows):
    """The input rows a layer reads to give its output rows ``rows``."""
    if layer[0] == "ffn":
        _, Lin, _, W1, _, W2 = layer
        units = {k for r in rows for k, _ in W2[r]}
        return {j for r in rows for j, _ in Lin[r]} | {j for k in units for j, _ in W1[k]}
    out = set(rows) if layer[2] else set()
    for W in (W for H in layer[4] if any(H[3][r][c] for r in rows for c in range(len(H[3][0]))) for W in H[:3]):
        out |= {j for row in W for j, w in enumerate(row) if w}
    return out


def _ffn(layer, z, h, d, need):
    _, Lin, l, W1, b1, W2 = layer
    units = {k for r in need for k, _ in W2[r]}
    u = {k: tm.relu(tm.lin([(w, z[j]) for j, w in W1[k]], b1[k], d), h) for k in units}
    return [tm.lin([(w, z[j]) for j, w in Lin[r]] + [(w, u[k]) for k, w in W2[r]], l[r], d) if r in need else None
            for r in range(len(Lin))]


def _attention(layer, Z, queries, h, d, need, last=False, extra=None):
    """The attention layer on Taylor models, for the query columns ``queries`` and rows ``need`` only.

    Each head's weighted values are ``A = m + (sum_k e_k (V_k - m)) (1/N)`` for ``pi = e / N``:
    as ``sum_k pi_k = 1`` exactly, ``A = sum_k pi_k V_k`` for any ``m`` (per value row, here the
    values' mean weighted by the centres of ``e``), so each weight's rest is multiplied by
    ``|V_k - m|``, small on the tokens that carry the weight, and ``1/N`` once after the sum.  In
    the ``last`` attention layer a softmax head's ``A`` is met with its convex hull (:mod:`.hull`);
    not earlier, where a model without gradient would widen a later exponential.  ``extra[h]``:
    head ``h``'s tail token (score ball, value balls; :mod:`.tail`) or None."""
    _, kind, skip, tau, heads, sparse = layer
    cols = list(zip(*Z))
    rho, inv_tau = _ball(skip), 1 / _ball(tau)
    out = [[(tm.lin([(rho, cols[j][r])], arb(0), d) if skip else tm.const(arb(0), d)) if r in need else None
            for j in queries] for r in range(len(Z))]
    for hi, (H, (WQ, WK, WV, WO)) in enumerate(zip(heads, sparse)):
        if not any(H[3][r][c] for r in need for c in range(len(H[3][0]))):
            continue
        keys = [[tm.lin([(w, z[j]) for j, w in row], arb(0), d) for row in WK] for z in cols]
        vals = [[tm.lin([(w, z[j]) for j, w in row], arb(0), d) for row in WV] for z in cols]
        tail = extra[hi] if extra else None
        if tail:
            vals.append([tm.const(v, d) for v in tail[1]])
        for qi, j in enumerate(queries):
            q = [tm.lin([(w * inv_tau, cols[j][c]) for c, w in row], arb(0), d) for row in WQ]
            s = [_dot(q, k, h, d) for k in keys] + ([tm.const(tail[0], d)] if tail else [])
            e, inv, u = _softmax(s, h, d, last) if kind == "softmax" else _hardmax(s, h, d)
            kept = [(p, val) for p, val in zip(e, vals) if p is not None]
            total = sum((p.c for p, _ in kept), arb(0))
            m = [(sum((p.c * val[a].c for p, val in kept), arb(0)) / total).mid() for a in range(len(WV))]
            m = [c if c.is_finite() else arb(0) for c in m]
            v = [tm.const(arb(0), d) for _ in WV]
            for p, val in kept:
                v = [tm.add(acc, tm.mul(p, tm.lin([(arb(1), b)], -c, d), h)) for acc, b, c in zip(v, val, m)]
            v = [tm.lin([(arb(1), tm.mul(acc, inv, h))], c, d) for acc, c in zip(v, m)]
            if u is not None:
                v = [hull.meet(t, u, [val[a] for val in vals], h) for a, t in enumerate(v)]
            for r, row in enumerate(WO):
                if r in need:
                    out[r][qi] = tm.lin([(arb(1), out[r][qi])] + [(w, v[c]) for c, w in row], arb(0), d)
    return out


def _dot(q, k, h, d):
    s = tm.lin([], arb(0), d)
    for a, b in zip(q, k):
        s = tm.add(s, tm.mul(a, b, h))
    return s


def _softmax(s, h, d, caps=False):
    """``(e, 1 / sum e, u)`` with ``e_k = exp(a_k)``, ``a_k = s_k - m - ell``: ``m`` the largest
    centre and ``ell`` the centre weights' average of the linear parts (exact balls; any choice
    gives the softmax); with ``caps`` the weights' upper bounds ``u`` over the box (:func:`.hull.caps`)."""
    m = max(arb(t.c.mid()) for t in s)
    w = [(arb(t.c.mid()) - m).exp() for t in s]
    total = sum(w, arb(0))
    ell = [arb((sum((wk * t.g[i].mid() for wk, t in zip(w, s)), arb(0)) / total).mid()) for i in range(d)]
    a = [tm.TM(t.c - m, [g - x for g, x in zip(t.g, ell)], t.r) for t in s]
    e = [tm.exp(t, h) for t in a]
    return e, tm.recip(tm.lin([(arb(1), t) for t in e], arb(0), d), h), hull.caps(a, h) if caps else None


def _hardmax(s, h, d):
    """``(e, 1, None)`` with ``e`` one-hot at the score that exceeds every other over the whole box."""
    ends = [(t.c - tm.spread(t, h), t.c + tm.spread(t, h)) for t in s]  # not a union: its radius is rounded
    top = [k for k, (lo, _) in enumerate(ends) if all(lo > hi for j, (_, hi) in enumerate(ends) if j != k)]
    if len(top) != 1:
        raise ArithmeticError("a hardmax row whose winner is not decided over the box")
    return [tm.const(arb(1), d) if k == top[0] else None for k in range(len(s))], tm.const(arb(1), d), None
