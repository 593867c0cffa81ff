"""The partition-of-unity network of [SL26] with exact weights (see docs/shi_liao.md, "The network").

Two blocks, no skip connections.  Layer 1 has ``P + 2`` heads reading queries and keys from the
position rows only: head ``h`` (affine head) puts its weight on token 1 exactly at column ``h``
and carries the affine score ``T_h(x) = 2 M_g <c_h, x> - M_g |c_h|^2`` and the value ``g(c_h)``;
the indicator head marks column 1; the position head returns ``lambda(M) p_j``.  The layer-1
feed-forward undoes the attention's scaling with ``z = relu(z) - relu(-z)`` and thresholds the
indicator.  Layer 2 is one softmax head whose scores at column 1 are the affine scores, i.e. the
softmax partition of unity ``sum_i beta_i(x) g(c_i)``.
"""

from __future__ import annotations

from sympy import Integer, Rational

from ...core.transformer import Attention, Embedding, FeedForward, Head, Readout, Transformer
from .constants import ROWS, Constants, cospi, sinpi

__all__ = ["build"]


# ------------------------------------------------------------------------------------------
# The network


def _zeros(r, c):
    return [[Integer(0)] * c for _ in range(r)]


def build(K: Constants) -> Transformer:
    """The two-block Transformer (docs/shi_liao.md, The network) with exact (SymPy) weights."""
    d, P, D = K.d, K.P, K.D
    R = ROWS(d)
    p0, p1 = R["pos"]
    zero, one = Integer(0), Integer(1)
    # Embedding: column 0 = [x; 1; 0; p_1], column j = [0; 0; 0; p_{j+1}].
    base = _zeros(D, P)
    for j in range(P):
        q = Rational(2 * (j + 1), P)
        base[p0][j] = sinpi(q)
        base[p1][j] = cospi(q)
    base[R["const"]][0] = one
    E = _zeros(D, d)
    for i in range(d):
        E[i][i] = one

    def pos_reader(rot):
        W = _zeros(2, D)
        for a in range(2):
            W[a][p0], W[a][p1] = rot[a]
        return W

    W_K = pos_reader([[K.M, zero], [zero, K.M]])
    identity = pos_reader([[one, zero], [zero, one]])
    heads = []
    for h in range(P):
        # R(theta_1 - theta_{h+1}) = R(-2 pi h / P): score peaks at key 0 exactly for query h.
        phi = Rational(-2 * h, P)
        rot = [[cospi(phi), sinpi(phi)], [-sinpi(phi), cospi(phi)]]
        c_h = K.centres[h]
        W_V = _zeros(2, D)
        for i in range(d):
            W_V[0][i] = 2 * K.M_g * c_h[i]
        W_V[0][R["const"]] = -K.M_g * sum(ci**2 for ci in c_h)
        W_V[1][R["const"]] = K.g_centres[h]
        W_O = _zeros(D, 2)
        W_O[R["T"]][0] = one
        W_O[R["g"]][1] = one
        heads.append(Head(_t(pos_reader(rot)), _t(W_K), _t(W_V), _t(W_O)))
    # Indicator head: value = constant row, written to the indicator row.
    W_V = _zeros(2, D)
    W_V[0][R["const"]] = one
    W_O = _zeros(D, 2)
    W_O[R["ind"]][0] = one
    heads.append(Head(_t(identity), _t(W_K), _t(W_V), _t(W_O)))
    # Position head: value = p_k, written back to the position rows.
    W_V = _zeros(2, D)
    W_V[0][p0] = one
    W_V[1][p1] = one
    W_O = _zeros(D, 2)
    W_O[p0][0] = one
    W_O[p1][1] = one
    heads.append(Head(_t(identity), _t(W_K), _t(W_V), _t(W_O)))
    att1 = Attention(tuple(heads), "softmax", zero)

    # FFN1: z = Lambda relu(z^ - 2 e^{-cM} e_ind) - Lambda relu(-z^).
    lam_diag = [zero] * D
    lam_diag[R["T"]] = 1 / K.eta
    lam_diag[R["g"]] = 1 / K.eta
    lam_diag[R["ind"]] = K.w_ind
    lam_diag[p0] = 1 / K.lam
    lam_diag[p1] = 1 / K.lam
    ffn1 = _split_relu_ffn(D, lam_diag, {R["ind"]: -2 * K.emcM})

    # Layer 2: query = indicator, key = T~, value = g~, written to row 0.
    q = _zeros(1, D)
    q[0][R["ind"]] = one
    k = _zeros(1, D)
    k[0][R["T"]] = one
    v = _zeros(1, D)
    v[0][R["g"]] = one
    o = _zeros(D, 1)
    o[0][0] = one
    att2 = Attention((Head(_t(q), _t(k), _t(v), _t(o)),), "softmax", zero)
    pass_diag = [zero] * D
    pass_diag[0] = one
    ffn2 = _split_relu_ffn(D, pass_diag, {})
    return Transformer(
        (att1, ffn1, att2, ffn2), Embedding(_t(base), _t(E), 0), Readout(0, 0), "vector", K.definitions()
    )


def _t(rows):
    return tuple(tuple(r) for r in rows)


def _split_relu_ffn(D, diag, shifts) -> FeedForward:
    """``z -> Lambda relu(z + s) - Lambda relu(-z)`` (width 2D): the identity ``z = relu(z) -
    relu(-z)`` scaled by ``diag``, with optional shifts ``s`` of the first half's bias."""
    zero, one = Integer(0), Integer(1)
    W1 = _zeros(2 * D, D)
    for r in range(D):
        W1[r][r] = one
        W1[D + r][r] = -one
    b1 = [zero] * (2 * D)
    for r, s in shifts.items():
        b1[r] = s
    W2 = _zeros(D, 2 * D)
    for r in range(D):
        W2[r][r] = diag[r]
        W2[r][D + r] = -diag[r]
    return FeedForward(_t(W1), tuple(b1), _t(W2), tuple([zero] * D), zero)
