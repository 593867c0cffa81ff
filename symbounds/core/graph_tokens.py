"""The operations of a layer graph that mix rows (tokens) or columns, in every context.

A tensor is a list of rows (tokens), each a list of context numbers.  The row-wise operations are
in :mod:`symbounds.core.graph`; here are the ones that read several rows or part of a row:

* ``attention``: multi-head self-attention with the semantics of PyTorch's
  ``nn.MultiheadAttention`` (Vaswani et al. 2017, "Attention is all you need", Sec. 3.2), per
  sequence and per head ``i``::

      q_j = Wq_i x_j + bq_i,   k_k = Wk_i x_k + bk_i,   v_k = Wv_i x_k + bv_i
      w_j = softmax_k(scale <q_j, k_k>)     over the keys k that query j may attend
      o_j^i = sum_k w_jk v_k,               y_j = Wo [o_j^1; ...; o_j^h] + bo

  (head ``i`` owns rows ``i dk .. (i+1) dk - 1`` of ``Wq`` and ``Wk``, ``i dv ..`` of ``Wv``:
  PyTorch's split of ``in_proj_weight``).  With ``hardmax`` the weights are ``1/|A|`` on the
  argmax set ``A`` of the scores (ties averaged, as the attention layers of
  :mod:`symbounds.core.transformer`); a positive ``scale`` does not move the argmax, so it is not
  applied there.  The softmax and the hardmax are :class:`~symbounds.core.evaluator.ScalarEvaluator`'s
  (the formula the Transformer layers use): the scores shifted by ``ctx.shift_point`` (an exact
  point for balls), one reciprocal per row.  In Taylor models the softmax head is
  :func:`_softmax_head_tm`: the score differences to the top key ``m`` as one product each, the
  weights met with the interval softmax of the score ranges, the values centred on ``v_m``.
* ``slice`` (columns ``start .. stop-1``), ``concat`` (columns of several tensors),
  ``select_tokens`` (rows by index), ``mean_tokens`` (the mean of each sequence's rows).

A tensor of ``T`` rows holds ``S = T / L`` independent sequences of length ``L``
(:func:`sequences`): ``batch_major`` (sequence ``s`` is rows ``s L .. s L + L - 1``: an
``[N, L, E]`` tensor flattened) or ``sequence_major`` (rows ``s, s + S, s + 2S, ...``:
``[L, N, E]``, PyTorch's layout without ``batch_first``).
"""

from __future__ import annotations

import flint

from .contexts import ExactUnsupported, Undecided
from .evaluator import ScalarEvaluator
from .taylor import TM, TaylorContext

__all__ = ["LAYOUTS", "dot", "sequences", "allowed_keys", "attention", "mean_tokens", "select_tokens", "slice_columns",
           "concat_columns"]

LAYOUTS = ("batch_major", "sequence_major")


def sequences(T: int, L: int, layout: str = "batch_major") -> list:
    """The rows of each of the ``T / L`` sequences, in position order."""
    S = T // L
    if layout == "sequence_major":
        return [[i * S + s for i in range(L)] for s in range(S)]
    return [[s * L + i for i in range(L)] for s in range(S)]


def allowed_keys(mask, L: int) -> list:
    """For each query position ``j`` the key positions it attends: all (``mask`` None), ``k <= j``
    (``"causal"``), or those where row ``j`` of the 0/1 matrix is 1."""
    if mask is None:
        return [list(range(L))] * L
    if mask == "causal":
        return [list(range(j + 1)) for j in range(L)]
    return [[k for k in range(L) if mask[j][k]] for j in range(L)]


def dot(ctx, a, b, la=None, lb=None):
    """``sum_i a_i b_i``; for Taylor models in one step (:func:`_dot_tm`) with the deviation bounds
    ``la``, ``lb`` when given (a query row meets every key: they are computed once)."""
    if isinstance(ctx, TaylorContext):
        return _dot_tm(ctx, a, b, la or [u.dev() for u in a], lb or [v.dev() for v in b])
    s = a[0] * b[0]
    for u, v in zip(a[1:], b[1:]):
        s = s + u * v
    return s


def _dot_tm(ctx, a, b, da, db) -> TM:
    """``sum_i a_i b_i`` of Taylor models ``a_i = c + <g, delta> + [-r, r]`` (``da``, ``db``: bounds
    ``D`` of ``|a_i - c|``, ``|b_i - c|``): each product is ``c_a c_b + <c_b g_a + c_a g_b, delta>``
    plus at most ``D_a D_b + r_a |c_b| + r_b |c_a|`` (which is :meth:`TM.__mul__`'s remainder
    ``La Lb + r_a (|c_b| + Lb) + r_b (|c_a| + La) + r_a r_b``, ``D = L + r``), summed in one model
    instead of ``2 len(a)`` intermediate ones."""
    c = g = None
    rem = flint.arb(0)
    for u, v, Du, Dv in zip(a, b, da, db):
        uc, vc = u.c, v.c
        c = uc * vc if c is None else c + uc * vc
        ug, vg = u.g, v.g
        if ug is not None and vg is not None:
            part = [p * vc + q * uc for p, q in zip(ug, vg)]
        elif ug is not None:
            part = [p * vc for p in ug]
        elif vg is not None:
            part = [q * uc for q in vg]
        else:
            part = None
        if part is not None:
            g = part if g is None else [x + y for x, y in zip(g, part)]
        rem = rem + Du * Dv
        if u.r is not None:
            rem = rem + u.r * abs(vc)
        if v.r is not None:
            rem = rem + v.r * abs(uc)
    return TM(ctx, c, None if g is None else tuple(g), None if rem.is_zero() else flint.arb(rem.upper()))


def attention(ctx, p: dict, X: list, project) -> list:
    """The ``attention`` node's output rows at the input rows ``X`` (see the module docstring).

    ``p`` holds the node's numbers in ``ctx`` (``q``, ``k``, ``v``, ``o``: the projections, applied
    by ``project(ctx, proj, row)``; ``heads``, ``scale``, ``mask``, ``hardmax``, ``L`` (None: one
    sequence of all rows), ``layout``)."""
    ev = ScalarEvaluator(ctx)
    h, hard = p["heads"], p["hardmax"]
    scale = p["scale"]
    if not hard and scale is None:
        raise ExactUnsupported("the exact context cannot apply an irrational score scale")
    Q = [project(ctx, p["q"], x) for x in X]
    K = [project(ctx, p["k"], x) for x in X]
    V = [project(ctx, p["v"], x) for x in X]
    dk, dv = len(Q[0]) // h, len(V[0]) // h
    taylor = isinstance(ctx, TaylorContext)
    lin = (lambda rows: [[u.dev() for u in row] for row in rows]) if taylor else (lambda rows: [None] * len(rows))
    QL, KL, VL = lin(Q), lin(K), lin(V)
    L = p["L"] or len(X)
    keys = allowed_keys(p["mask"], L)
    O = [None] * len(X)
    for seq in sequences(len(X), L, p["layout"]):
        for jp, j in enumerate(seq):
            ks = [seq[k] for k in keys[jp]]
            o = []
            for i in range(h):
                hk = slice(i * dk, (i + 1) * dk)
                q, ql = Q[j][hk], QL[j] and QL[j][hk]
                scores = [dot(ctx, q, K[k][hk], ql, KL[k] and KL[k][hk]) for k in ks]
                if taylor and not hard:
                    o.extend(_softmax_head_tm(ctx, scale, q, ql, scores, [K[k][hk] for k in ks],
                                              [V[k][i * dv:(i + 1) * dv] for k in ks]))
                    continue
                if hard:
                    w = ev.hardmax(scores)
                else:
                    w = ev.softmax([s * scale for s in scores])
                wl = [u.dev() for u in w] if taylor else None
                for a in range(i * dv, (i + 1) * dv):
                    o.append(dot(ctx, w, [V[k][a] for k in ks], wl, taylor and [VL[k][a] for k in ks] or None))
            O[j] = o
    return [project(ctx, p["o"], o) for o in O]


def _softmax_head_tm(ctx, scale, q, ql, scores, Ks, Vs) -> list:
    """One softmax head's output ``o = sum_k w_k v_k`` in Taylor models, over the keys ``Ks``
    (their value rows ``Vs``), with ``scores[k]`` the model of ``<q, k_k>``.

    With ``m`` the key whose score ``s_k = scale <q, k_k>`` has the largest upper end (the shift
    of :meth:`ScalarEvaluator.softmax`):

    * each shifted score is one product, ``d_k = s_k - s_m = scale <q, k_k - k_m>``
      (:func:`_dot_tm` on the difference rows; ``d_m = 0`` exactly), not the difference of two
      separately enclosed scores (whose remainders would add);
    * ``w_k = e^(d_k) / sum_l e^(d_l)`` (one reciprocal), then *met* with the interval softmax of
      the ranges: with ``[a_l, b_l]`` the range of ``d_l`` (and, separately, of ``s_l``; softmax
      does not move under a shift, so both bound the same exact weight and their balls are
      intersected), ``w_k`` lies in
      ``[e^(a_k) / (e^(a_k) + sum_(l != k) e^(b_l)), e^(b_k) / (e^(b_k) + sum_(l != k) e^(a_l))]``
      (softmax rises in its own score and falls in the others).  The meet of the model with that
      interval is taken soundly by *replacement*: the weight becomes the constant model of the
      interval (no gradient) when the interval is narrower than the model's range *and* the
      model's remainder exceeds its linear part; else the model is kept unchanged (on a small box
      the model is first-order tight, remainder ``O(h^2)``, and its gradient is worth more than a
      slightly narrower constant).  When the sum's reciprocal is undecided (its range reaches 0),
      every weight is the interval (``Undecided`` again if an interval is not finite);
    * the values are centred on ``v_m``: ``o = v_m + sum_(k != m) w_k (v_k - v_m)``, an identity
      for the exact weights (``sum_k w_k = 1``); each ``w_k`` here encloses the exact weight, so
      the result encloses the exact ``o`` although the enclosures need not sum to 1.  A weight's
      remainder then multiplies ``v_k - v_m``, not ``v_k``.
    """
    n = len(Ks)
    s_rng = [(sk * scale).range() for sk in scores]
    m = max(range(n), key=lambda k: s_rng[k].upper())
    km = Ks[m]
    d = []
    for k in range(n):
        if k == m:
            d.append(ctx.zero)
            continue
        diff = [a - b for a, b in zip(Ks[k], km)]
        d.append(_dot_tm(ctx, q, diff, ql, [u.dev() for u in diff]) * scale)
    d_rng = [v.range() for v in d]
    box = [_interval_softmax(s_rng, k).intersection(_interval_softmax(d_rng, k)) for k in range(n)]
    e = [ctx.one if k == m else ctx.exp(d[k]) for k in range(n)]
    total = e[0]
    for v in e[1:]:
        total = total + v
    try:
        inv = ctx.one / total
        w = [v * inv for v in e]
    except Undecided:
        if not all(b.is_finite() for b in box):
            raise  # no interval to fall back on: the search splits the box
        w = [None] * n
    for k in range(n):
        if w[k] is None or (w[k].r is not None and 2 * w[k].r > w[k].dev() and box[k].rad() < w[k].dev()):
            w[k] = _constant(ctx, box[k])  # remainder > linear part (dev = linear bound + r)
    out = []
    others = [k for k in range(n) if k != m]
    if not others:
        return list(Vs[m])
    wl = [w[k].dev() for k in others]
    for a in range(len(Vs[m])):
        vm = Vs[m][a]
        dv = [Vs[k][a] - vm for k in others]
        out.append(vm + _dot_tm(ctx, [w[k] for k in others], dv, wl, [u.dev() for u in dv]))
    return out


#: a weight replaced by the constant model of its interval (one name for it: the tests count the replacements)
_constant = TaylorContext.hull


def _interval_softmax(rng: list, k: int) -> flint.arb:
    """A ball holding ``e^(x_k) / sum_l e^(x_l)`` for every ``x_l`` in the ball ``rng[l]``: the
    hull of its values at the two corners (lower end ``k``, upper ends elsewhere, and the
    reverse), shifted by the largest upper end so no exponential overflows."""
    top = max(r.upper() for r in rng)
    lo = [flint.arb(r.lower()) - top for r in rng]
    hi = [flint.arb(r.upper()) - top for r in rng]
    el, eh = [v.exp() for v in lo], [v.exp() for v in hi]
    sl, sh = sum(el[1:], el[0]), sum(eh[1:], eh[0])
    a = el[k] / (el[k] + (sh - eh[k]))
    b = eh[k] / (eh[k] + (sl - el[k]))
    return a.union(b).intersection(flint.arb(0.5, 0.5))


def mean_tokens(ctx, inv_L, L: int, layout: str, X: list) -> list:
    """Row ``s``: ``(1/L) sum`` of the rows of sequence ``s`` (``inv_L`` the context's ``1/L``)."""
    out = []
    for seq in sequences(len(X), L, layout):
        acc = list(X[seq[0]])
        for t in seq[1:]:
            acc = [a + v for a, v in zip(acc, X[t])]
        out.append([a * inv_L for a in acc])
    return out


def select_tokens(indices, X: list) -> list:
    """The rows ``indices`` of ``X``, in that order (repeats allowed)."""
    return [list(X[t]) for t in indices]


def slice_columns(start: int, stop: int, X: list) -> list:
    """Columns ``start .. stop-1`` of every row."""
    return [row[start:stop] for row in X]


def concat_columns(tensors: list) -> list:
    """Row ``t``: the rows ``t`` of every tensor, one after another."""
    return [[v for X in tensors for v in X[t]] for t in range(len(tensors[0]))]
