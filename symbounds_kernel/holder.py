"""Deciding a class certificate (``symbounds-class-certificate/1``, [SL26], docs/checking.md).

The claim: for every ``g`` on ``[0,1]^d`` with ``|g| <= B`` and ``|g(x) - g(y)| <= C_H |x - y|^alpha``,
``sup_x |T_g(x) - g(x)| <= eps``, where ``T_g`` is the embedded model with its ``P`` value slots
(row 1, column ``d`` of ``W_V`` of layer 1's first ``P`` heads, recorded as 0) set to ``v_h = g(c_h)``
and ``c_h`` the grid centres ``((2i - 1) / (2m))_i``, ``P = m^d``, in product order.

What the kernel derives from the weights, in exact balls, for all ``x`` and ``v`` at once:

1. layer 1's scores do not depend on ``x``, so after it ``Z = A + sum x_i B_i + sum_h v_h w_h p_h^T``
   (``w_h`` column 1 of head ``h``'s ``W_O``, ``p_h = pi_h u`` its weights on the constant row ``u``);
2. every ReLU of FFN 1 left after the pair rewriting reads an entry free of ``x`` and ``v``: ``Z``
   stays affine;
3. layer 2 (one softmax head, no skip) has a query free of ``x`` and ``v``, keys free of ``v`` and
   values free of ``x`` and exactly 0 at ``v = 0``; FFN 2 passes the readout row linearly.

Hence ``T_v(x) = sum_k beta_k(x) sum_h G_kh v_h`` with ``beta = softmax(s)``, ``s_k(x) = b_k + a_k . x``
exactly affine, and (docs/shi_liao.md, "Every target of the class")
``|T_g - g| <= E(x) = sum_k beta_k(x) [min(C_H |x - c_k|^alpha, 2B) + B l_k]``,
``l_k = |G_kk - 1| + sum_{h != k} |G_kh|``.  On a box, ``beta_k <= 1 / (1 + sum_{l != k} e^{m_lk})``,
``m_lk <= min(s_l - s_k)``: exact for the ``HEAVY`` largest scores at the centre, one sum per box for
the others (``upper``'s comment); the bracket is taken at the largest distance
from the box to ``c_k`` (exact; no derivative of ``|x - c_k|^alpha``), and ``sup E`` over the box is at
most the greedy optimum of ``sum w_k A_k``, ``0 <= w_k <= cap_k``, ``sum w_k = 1``.
"""

import itertools
from fractions import Fraction

from flint import arb, arb_mat, ctx

from .network import Network, _ball, _mat, embed, parse_model
from .read import Rejected, number
from .verify import PREC, SPLITS, _get, _interval, _upper, covering_boxes, digested, shown

FORMAT = "symbounds-class-certificate/1"
HEAVY = 8
_KEYS = {"format", "symbounds", "claim", "construction", "instance", "class", "prec", "model_prec",
         "model_sha256", "model", "verdict", "max_bound", "worst", "boxes", "undecided_boxes", "seconds",
         "boxes_evaluated"}


def check_class(cert, progress=None) -> str:
    """Accept a class certificate (returns a one-line summary) or raise :class:`Rejected`."""
    if set(cert) != _KEYS:
        raise Rejected(f"unknown or missing fields: {sorted(set(cert) ^ _KEYS)[:3]}")
    if cert["verdict"] != "proved" or cert["undecided_boxes"] != [] or cert["construction"] != "shi_liao":
        raise Rejected("the verdict is not 'proved' for 'shi_liao' with no undecided box")
    inst, cls = _get(cert, "instance", dict), _get(cert, "class", dict)
    if set(inst) != {"paper", "d", "eps", "M", "Mg"} or inst["paper"] != "shi_liao" or set(cls) != {
            "alpha", "holder", "bound"}:
        raise Rejected("the instance or the class has unknown or missing fields")
    d = _get(inst, "d", int, "instance")
    if not 1 <= d <= 8:
        raise Rejected("'d' is not in 1..8")
    if cert["claim"] != (f"for every g on [0,1]^{d} with |g| <= B and |g(x) - g(y)| <= C_H |x - y|^alpha: "
                         f"sup over [0,1]^{d} of |T_g(x) - g(x)| <= eps"):
        raise Rejected("the claim's wording is not the claim checked")
    eps = number(inst["eps"], "instance.eps")
    alpha, C_H, B = (number(cls[k], f"class.{k}") for k in ("alpha", "holder", "bound"))
    if not (eps > 0 and 0 < alpha <= 1 and C_H > 0 and B > 0):
        raise Rejected("eps, C_H and B must be positive and alpha in (0, 1]")
    model = digested(cert, _get(cert, "model", dict))
    boxes = covering_boxes(cert, d, eps)
    old = ctx.prec
    ctx.prec = PREC
    try:
        net = ClassNet(model, d, alpha, C_H, B)
        for i, (lo, hi, bound) in enumerate(boxes):
            if not _proves(net, lo, hi, bound, SPLITS):
                raise Rejected(f"box {i}: the kernel cannot bound E by its recorded bound {float(bound):.6g}")
            if progress is not None:
                progress(i + 1, len(boxes))
    finally:
        ctx.prec = old
    return (f"{len(boxes)} boxes cover [0,1]^{d}; for every g of the class, sup |T_g - g| <= "
            f"{shown(max(b for *_, b in boxes))} <= eps = {eps}")


def _zero(M) -> bool:
    return all(v.is_zero() for v in M.entries())


class ClassNet:
    """The affine scores ``s_k = b_k + sum_i a_ki x_i``, the factors ``l_k`` and the centres."""

    def __init__(self, model, d, alpha, C_H, B):
        base, E, col, layers, (R, c) = parse_model(model, d)
        P = len(base[0])
        m = next((m for m in range(1, P + 1) if m ** d >= P), 0)
        if [L[0] for L in layers] != ["attention", "ffn", "attention", "ffn"] or m ** d != P or layers[2][1] != (
                "softmax") or len(layers[2][4]) != 1 or layers[2][2] or len(layers[0][4]) < P or len(base) <= d:
            raise Rejected("model: not the two blocks of [SL26] on a grid of P = m^d tokens")
        self.alpha, self.d = alpha, d
        self.centres = [[Fraction(2 * i - 1, 2 * m) for i in idx] for idx in itertools.product(range(1, m + 1), repeat=d)]
        A, Bx = embed(base, E, col, d)
        heads = layers[0][4][:P]
        if not Network._constant_scores(layers[0], Bx) or not all(v.is_zero() for b in Bx for v in b.tolist()[d]):
            raise Rejected("model: layer 1's scores or its constant row depend on x")
        if any(len(WV) < 2 or WV[1][d] != 0 for _, _, WV, _ in heads):
            raise Rejected("model: a value slot (row 1, column d of W_V in layer 1) is not 0")
        u, rec = A.tolist()[d], []
        A, Bx = Network._affine_attention(layers[0], A, Bx, rec)
        w = [arb_mat([[_ball(r[1])] for r in WO]) for _, _, _, WO in heads]
        p = [[sum((e * uk for e, uk in zip(ej, u)), arb(0)) / t for ej, t in rows] for rows in rec[:P]]
        # FFN 1: Z -> Lin Z + l + W2 relu(W1 Z + b1) with every unit's input free of x and v
        _, Lin, lb, W1, b1, W2 = layers[1]
        n, Lin, lb = len(base[0]), _dense(Lin, len(base)), arb_mat([[v] for v in lb])
        A2 = Lin * A + lb * arb_mat([[1] * n])
        used = sorted({k for r in W2 for k, _ in r})  # the units whose output is read
        if used:
            W1, b1 = _dense([W1[k] for k in used], len(base)), [b1[k] for k in used]
            W2 = _dense([[(used.index(k), v) for k, v in r] for r in W2], len(used))
            if not all(_zero(W1 * b) for b in Bx + w):
                raise Rejected("model: a ReLU of FFN 1 reads an entry that depends on x or on the values")
            hid = (W1 * A + arb_mat([[v] * n for v in b1])).tolist()
            A2 += W2 * arb_mat([[v.max(arb(0)) for v in r] for r in hid])
        A = A2
        Bx, w = [Lin * b for b in Bx], [Lin * v for v in w]
        # layer 2 and FFN 2
        WQ, WK, WV, WO = (_mat(M) for M in layers[2][4][0])
        tau = 1 / _ball(layers[2][3])
        if not (all(_zero(WQ * _column(b, c)) for b in Bx) and all(_zero(WQ * v) or p[h][c].is_zero()
                                                                 for h, v in enumerate(w))
                and all(_zero(WK * v) for v in w) and _zero(WV * A) and all(_zero(WV * b) for b in Bx)):
            raise Rejected("model: layer 2's query, keys or values do not have the construction's form")
        _, Lin2, lb2, _, _, W2b = layers[3]
        if W2b[R] or not lb2[R].is_zero():
            raise Rejected("model: FFN 2 does not pass the readout row linearly")
        out = _dense([Lin2[R]], len(base)) * WO * WV  # the readout of one unit of value, 1 x D
        q = (WQ * _column(A, c)).transpose() * tau
        self.b = (q * WK * A).tolist()[0]
        self.a = [(q * WK * b).tolist()[0] for b in Bx]
        g = [(out * v).tolist()[0][0] for v in w]
        ell = [abs(g[k] * p[k][k] - 1) + sum((abs(g[h] * p[h][k]) for h in range(P) if h != k), arb(0))
               for k in range(P)]
        self.c = [[_ball(v) for v in c] for c in self.centres]
        self.C_H, self.two_B, self.half_alpha = _ball(C_H), _ball(2 * B), _ball(alpha) / 2
        self.B_ell = [(_ball(B) * v).upper() for v in ell]

    def diff(self, k, l, X):
        """``s_k - s_l`` over the box ``X`` (balls): affine, so exact up to rounding."""
        v = self.b[k] - self.b[l]
        for i, x in enumerate(X):
            v += (self.a[i][k] - self.a[i][l]) * x
        return v

    def upper(self, lo, hi) -> arb:
        """An upper bound of ``E`` over the box ``[lo, hi]`` (an exact ball): with ``A_k`` the
        bracket and ``cap_k`` the weight cap, ``sum beta_k A_k <= t + sum_k cap_k (A_k - t)^+`` for
        every ``t`` (as ``sum beta_k = 1``); ``t`` is the greedy one, found in floats."""
        X = [_interval(a, c) for a, c in zip(lo, hi)]
        ends = [(_ball(a), _ball(c)) for a, c in zip(lo, hi)]
        mid = [float((a + c) / 2) for a, c in zip(lo, hi)]
        P, zero = len(self.b), arb(0)
        sc = [float(self.b[k].mid()) + sum(float(self.a[i][k].mid()) * mid[i] for i in range(self.d))
              for k in range(P)]
        order = sorted(range(P), key=sc.__getitem__, reverse=True)
        heavy, top = order[:HEAVY], order[0]
        # every other token l through one sum: min_X (s_l - s_k) >= u_l - (s_k(x_c) + rho_k), with
        # u_l = s_l(x_c) - rho_l, rho_l = sum_i |a_li - a_top,i| h_i (x_c the centre, h the half-widths)
        xc, h = [_ball((a + c) / 2) for a, c in zip(lo, hi)], [_ball((c - a) / 2) for a, c in zip(lo, hi)]
        at = [self.b[k] + sum((self.a[i][k] * xc[i] for i in range(self.d)), zero) for k in range(P)]
        rho = [sum((abs(self.a[i][k] - self.a[i][top]) * h[i] for i in range(self.d)), zero) for k in range(P)]
        ref = at[top].mid()
        term = {l: (at[l] - rho[l] - ref).exp() for l in order[HEAVY:]}
        rest = sum((v.lower() for v in term.values()), zero)
        items = []
        for k in range(P):
            den = arb(1)
            for l in heavy:
                if l != k:
                    den += self.diff(l, k, X).lower().exp().lower()
            r = (rest - term[k].upper() if k in term else rest).lower()
            if r > 0:
                den += (ref - at[k] - rho[k]).exp().lower() * r  # a ball: its rounding stays in den
            far2 = sum((max(abs(a - c).upper(), abs(b - c).upper()) ** 2 for (a, b), c in zip(ends, self.c[k])), zero)
            r = far2.upper().sqrt() if self.alpha == 1 else far2.upper() ** self.half_alpha
            items.append((((self.C_H * r).min(self.two_B) + self.B_ell[k]).upper(), (1 / den).upper()))
        left, t = 1.0, None
        for value, cap in sorted(items, key=lambda vc: float(vc[0]), reverse=True):
            left, t = left - float(cap), value
            if left <= 0:
                break
        return (t + sum(((v - t).max(zero) * cap for v, cap in items), zero)).upper()


def _dense(sparse, D):
    return arb_mat([[dict(r).get(j, 0) for j in range(D)] for r in sparse])


def _column(M, c):
    return arb_mat([[r[c]] for r in M.tolist()])


def _proves(net, lo, hi, bound, splits) -> bool:
    """Is ``E <= bound`` on the box, from its own bound or from its two halves'?"""
    if _upper(net.upper(lo, hi)) <= bound:
        return True
    if splits == 0:
        return False
    k = max(range(len(lo)), key=lambda i: hi[i] - lo[i])
    mid = (lo[k] + hi[k]) / 2
    return (_proves(net, lo, hi[:k] + [mid] + hi[k + 1:], bound, splits - 1)
            and _proves(net, lo[:k] + [mid] + lo[k + 1:], hi, bound, splits - 1))
