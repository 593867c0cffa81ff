"""The ``attention`` node of an exported ``nn.MultiheadAttention``, from where its entries come from.

PyTorch writes self-attention (``F.multi_head_attention_forward`` and its scaled dot product) as
a projection ``P = x W_in^T + b_in``, reshapes and transposes of ``P`` into per-head queries
``Q_b`` (``[L, dk]``), keys ``K_b^T`` (``[dk, L]``) and values ``V_b`` (``[L, dv]``) for every
batch index ``b`` (a pair of a sequence and a head), scores ``(s_q Q_b)(s_k K_b^T)`` (the score
factor split as ``sqrt(scale)`` on each side, or one ``Mul``/``Div`` of the scores), an additive
mask of 0 and ``-inf``, a softmax over the keys and a product with ``V_b``.  Given the views
(:mod:`symbounds.core.onnx_views`) of ``Q``, ``K^T`` and ``V``, :func:`attention_node` checks
that this is the computation of one ``attention`` node and writes its parameters:

* every row of ``Q_b``, ``K_b``, ``V_b`` is one token ``t(b, j)`` (the same for the three), and
  one set of columns of ``P`` per ``b`` (a head's block);
* the token lists ``t(b, .)`` are the sequences of one layout (``batch_major`` or
  ``sequence_major``), each in position order, covering every row once; every sequence has the
  same heads (column blocks);
* the mask is the same for every ``b`` and only 0 (attends) or ``-inf`` (does not).

The score factor is the exact rational of what the graph multiplies by: the product of the two
float constants (``fl(sqrt(fl(1/fl(sqrt dk))))^2`` in PyTorch's export), never ``1/sqrt(dk)``
itself.  The node's output projection is the identity; the importer folds the following affine
node (``out_proj``) into it.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from .onnx_io import OnnxError

__all__ = ["attention_node"]


def _rows_of(tok, col, where, what):
    """``t[b, j]`` and the columns ``c[b]`` of a ``[nb, L, d]`` view (one token per row, one set
    of columns per ``b``)."""
    if tok.shape[-1] == 0:
        raise OnnxError(f"{where}: empty {what}")
    t = tok[:, :, 0]
    if not np.all(tok == t[:, :, None]):
        raise OnnxError(f"{where}: a row of the {what} mixes tokens (not a reshape into heads)")
    c = col[:, 0, :]
    if not np.all(col == c[:, None, :]):
        raise OnnxError(f"{where}: the {what} of one head read different columns in different rows")
    return t, c


def _layout(seqs, T, L, where):
    """``batch_major`` or ``sequence_major`` when the sequences (tuples of rows, in position
    order) are those of that layout of ``T`` rows, else an error."""
    S = T // L
    if S * L != T or len(seqs) != S:
        raise OnnxError(f"{where}: the attention's sequences do not cover the {T} rows once")
    want = {"batch_major": {tuple(range(s * L, s * L + L)) for s in range(S)},
            "sequence_major": {tuple(range(s, T, S)) for s in range(S)}}
    for name in ("batch_major", "sequence_major"):
        if set(seqs) == want[name]:
            return name
    raise OnnxError(f"{where}: the attention's sequences are neither batch-major nor sequence-major rows")


def _mask(mask, B, L, where):
    """The 0/1 matrix (1 = attends) of an additive mask of 0 and ``-inf``: None when every key
    is attended, ``"causal"`` for the lower triangle."""
    if mask is None:
        return None
    try:
        m = np.broadcast_to(np.asarray(mask, dtype=np.float64), tuple(B) + (L, L)).reshape(-1, L, L)
    except ValueError:
        raise OnnxError(f"{where}: a mask of shape {list(np.shape(mask))} does not fit scores of {L} x {L}") from None
    if not np.all(m == m[:1]):
        raise OnnxError(f"{where}: the mask differs between heads or sequences (a key padding mask is not supported)")
    m = m[0]
    ok = (m == 0) | (m == -np.inf)
    if not np.all(ok):
        # a large finite value (float32's lowest, as the dynamo exporter writes is_causal=True)
        # leaves a weight e^(-3.4e38) > 0 in the graph's exact function: not the node's mask
        bad = m[~ok].flat[0]
        raise OnnxError(f"{where}: an additive mask with entries other than 0 and -inf ({bad:.6g}; "
                        "give the mask as attn_mask)")
    allow = (m == 0).astype(int)
    if not np.all(allow.any(axis=1)):
        raise OnnxError(f"{where}: a mask row that attends no key (its softmax is undefined)")
    if allow.all():
        return None
    if np.array_equal(allow, np.tril(np.ones((L, L), dtype=int))):
        return "causal"
    return tuple(tuple(int(v) for v in row) for row in allow)


def attention_node(imp, q, kT, v, scale: Fraction, mask, where):
    """``(x, params, out_tok, out_col)``: the input tensor and parameters of the ``attention``
    node computing ``softmax(scale Q K^T + mask) V`` for the views ``q``, ``kT``, ``v`` (see the
    module docstring), and the index arrays of its result in the shape of ``V``'s product
    (``out_tok``, ``out_col``: rows and columns of the node's output).  ``imp`` is the importer
    (its index budget, nodes, rows and widths of tensors)."""
    B = q.shape[:-2]
    if q.rank < 2 or kT.shape[:-2] != B or v.shape[:-2] != B:
        raise OnnxError(f"{where}: queries, keys and values of different batch shapes")
    L, dk = q.shape[-2:]
    if kT.shape[-2:] != (dk, L) or v.shape[-2] != L:
        raise OnnxError(f"{where}: queries {list(q.shape)}, keys^T {list(kT.shape)} and values {list(v.shape)} "
                        "are not self-attention over one sequence")
    dv = v.shape[-1]
    nb = int(np.prod(B, dtype=object))
    tq, cq = (a.reshape(nb, L, dk) for a in q.arrays(imp.budget))
    tk, ck = (np.swapaxes(a.reshape(nb, dk, L), 1, 2) for a in kT.arrays(imp.budget))
    tv, cv = (a.reshape(nb, L, dv) for a in v.arrays(imp.budget))
    t, cq = _rows_of(tq, cq, where, "queries")
    tk_, ck = _rows_of(tk, ck, where, "keys")
    tv_, cv = _rows_of(tv, cv, where, "values")
    if not (np.array_equal(t, tk_) and np.array_equal(t, tv_)):
        raise OnnxError(f"{where}: queries, keys and values of different tokens (not self-attention)")
    x, proj = _projections(imp, (q.name, kT.name, v.name), where)
    T = imp.rows[x]
    groups: dict = {}
    for b in range(nb):
        groups.setdefault(tuple(int(r) for r in t[b]), []).append(b)
    layout = _layout(list(groups), T, L, where)
    triple = lambda b: (tuple(cq[b]), tuple(ck[b]), tuple(cv[b]))
    first = groups[min(groups)]
    heads = [triple(b) for b in first]
    head_of = {}
    for seq, bs in groups.items():
        free = list(range(len(heads)))
        for b in bs:
            i = next((i for i in free if heads[i] == triple(b)), None)
            if i is None or len(bs) != len(heads):
                raise OnnxError(f"{where}: the sequences do not have the same heads")
            free.remove(i)
            head_of[b] = i
    h = len(heads)
    (Wq, bq), (Wk, bk), (Wv, bv) = proj
    rows = lambda W, cols, f=Fraction(1): tuple(tuple(f * w for w in W[c]) for c in cols)
    vals = lambda bb, cols, f=Fraction(1): tuple(f * bb[c] for c in cols)
    params = {"heads": h,
              "Wq": sum((rows(Wq, hq[0]) for hq in heads), ()), "bq": sum((vals(bq, hq[0]) for hq in heads), ()),
              "Wk": sum((rows(Wk, hq[1]) for hq in heads), ()), "bk": sum((vals(bk, hq[1]) for hq in heads), ()),
              "Wv": sum((rows(Wv, hq[2], v.factor) for hq in heads), ()),
              "bv": sum((vals(bv, hq[2], v.factor) for hq in heads), ()),
              "Wo": tuple(tuple(Fraction(int(i == j)) for j in range(h * dv)) for i in range(h * dv)),
              "bo": (Fraction(0),) * (h * dv),
              "scale": scale, "mask": _mask(mask, B, L, where), "sequence_length": L, "layout": layout}
    if scale <= 0:
        raise OnnxError(f"{where}: the score factor {float(scale):g} is not positive")
    hb = np.array([head_of[b] for b in range(nb)], dtype=np.int64)
    imp.budget.charge(2 * nb * L * dv)
    out_tok = np.broadcast_to(t[:, :, None], (nb, L, dv)).reshape(B + (L, dv))
    out_col = (hb[:, None, None] * dv + np.arange(dv)[None, None, :])
    out_col = np.broadcast_to(out_col, (nb, L, dv)).reshape(B + (L, dv))
    return x, params, out_tok, out_col


def _projections(imp, names, where):
    """The tensor the queries, keys and values are computed from, and each one's ``(W, b)``
    (rows indexed by the columns of its tensor): the affine nodes when all three are affine
    maps of one tensor, else the identity of one tensor they all read."""
    nodes = [imp.node_named(n) for n in names]
    if all(nd is not None and nd.op == "affine" for nd in nodes) and len({nd.inputs[0] for nd in nodes}) == 1:
        return nodes[0].inputs[0], [(nd.params["W"], nd.params["b"]) for nd in nodes]
    if len(set(names)) == 1:
        n = imp.widths[names[0]]
        eye = tuple(tuple(Fraction(int(i == j)) for j in range(n)) for i in range(n))
        return names[0], [(eye, (Fraction(0),) * n)] * 3
    raise OnnxError(f"{where}: queries, keys and values are not projections of one tensor")
