"""The far tokens of the last softmax layer, enclosed together in plain balls.

After the affine stage, a network whose layers up to the last attention are feed-forward ones
(token by token) gives each token's column over the box as a ball, cheaply, in ball matrices:
``Z = A + sum_i X_i B_i`` with ``X_i`` the box's side, every feed-forward layer on all columns at
once.  In the last layer only the readout column's query is needed; a token ``k`` whose score
``s_k`` lies ``CUT`` below the best lower end of any score carries a weight below ``e^-CUT``.
Such tokens (the *tail*, common to all heads) are not given Taylor models: each head sees them as
one extra token whose ``e^s`` encloses ``E = sum_tail e^(s_k)`` and whose value encloses their
values' hull, since ``sum_tail e^(s_k) v_k = E v`` for some ``v`` in the hull (the weights are
positive).  With ``s in [sigma + log sum_tail e^(lo_k - sigma), sigma + log sum_tail e^(hi_k - sigma)]``
(``[lo_k, hi_k]`` the ball of ``s_k``, ``sigma`` any exact shift), ``e^s`` contains ``E``.  Which tokens form the tail is chosen in floats; the enclosure holds for any choice.
"""

from flint import arb, arb_mat

CUT = 80  # nats below the best score: each weight of the tail is below e^-80 (1.8e-35)
MIN_TOKENS = 32  # fewer tokens: no tail


def _dense(sparse, cols):
    return arb_mat([[next((w for j, w in row if j == c), arb(0)) for c in range(cols)] for row in sparse])


class Tail:
    """The ball-matrix pass of a network to its last (softmax) attention layer."""

    def __init__(self, net):
        D = net.A.nrows()
        self.net, self.ffn = net, []
        for layer in net.layers[net.start:net.last_attention]:
            _, Lin, l, W1, b1, W2 = layer
            self.ffn.append((_dense(Lin, D), arb_mat([[v] for v in l]), _dense(W1, D), arb_mat([[v] for v in b1]),
                             _dense(W2, len(W1))))
        _, _, _, tau, heads, _ = net.layers[net.last_attention]
        ball = lambda M: arb_mat([[arb(v.numerator) / v.denominator for v in r] for r in M])
        self.heads = [(ball(WQ) * (1 / (arb(tau.numerator) / tau.denominator)), ball(WK), ball(WV)) for WQ, WK, WV, _ in heads]

    @staticmethod
    def applies(net) -> bool:
        layers = net.layers
        return (net.A.ncols() >= MIN_TOKENS and net.start < net.last_attention
                and layers[net.last_attention][1] == "softmax"
                and all(L[0] == "ffn" for L in layers[net.start:net.last_attention]))

    def scores(self, box, col):
        """Per head of the last layer, the balls of every token's score against the query of column
        ``col`` (``s_k = q . k_k / tau``) and of its value rows ``W_V z_k``, over ``box``."""
        n = self.net.A.ncols()
        Z = self.net.A
        for x, Bi in zip(box, self.net.B):
            Z = Z + Bi * x
        ones = arb_mat([[1] * n])
        for Lin, l, W1, b1, W2 in self.ffn:
            hidden = (W1 * Z + b1 * ones).tolist()
            Z = Lin * Z + l * ones + W2 * arb_mat([[v.max(arb(0)) for v in row] for row in hidden])
        zc = arb_mat([[Z[r, col]] for r in range(Z.nrows())])
        scores, values = [], []
        for WQ, WK, WV in self.heads:
            scores.append(((WQ * zc).transpose() * (WK * Z)).entries())
            values.append((WV * Z).tolist())
        return scores, values

    def split(self, box, col):
        """``(keep, extra)``: the columns given Taylor models (``col`` among them) and, per head of
        the last layer, ``(score ball, value balls)`` of its tail token, or None."""
        n = self.net.A.ncols()
        scores, values = self.scores(box, col)
        keep = {col}
        for s in scores:
            lo = [float(v.lower()) for v in s]
            best = max(lo)
            keep |= {k for k, v in enumerate(s) if not float(v.upper()) < best - CUT}
        tail = [k for k in range(n) if k not in keep]
        if not tail:
            return sorted(keep), None
        extra = []
        for s, V in zip(scores, values):
            shift = s[max(tail, key=lambda k: float(s[k].lower()))].lower()
            low = sum(((s[k].lower() - shift).exp() for k in tail), arb(0)).lower()
            high = sum(((s[k].upper() - shift).exp() for k in tail), arb(0)).upper()
            score = (shift + low.log()).lower().union((shift + high.log()).upper())
            extra.append((score, [_hull(row[k] for k in tail) for row in V]))
        return sorted(keep), extra


def _hull(balls):
    lo = hi = None
    for v in balls:
        lo, hi = (v.lower(), v.upper()) if lo is None else (lo.min(v.lower()), hi.max(v.upper()))
    return lo.union(hi)
