"""The claims of exact sequence interpolation [AFZ25], declared once (docs/alcalde.md, "Claims").

The hardmax network is checked in exact rationals stage by stage (S1-S3), end to end (I1), and
against the paper's sizes (B1-B3).  The softmax network adds X1 (Arb balls: every token lands on
its own cluster's segment of the line) and X2 (exact: on each segment the remaining layers are the
constant map onto the target), whose conjunction is I1.
"""

from __future__ import annotations

from ...core.claims import Claim, Relation

__all__ = ["CLAIMS"]

_C = lambda *a, **k: Claim(*a, **k)  # noqa: E731

#: Every claim of the interpolation proof, by id.
CLAIMS = {c.id: c for c in (
    _C("S1", "after separation each sequence owns its m_j chosen tokens privately",
       r"\#\{j : \text{a chosen token of } X^j \text{ is shared or repeated}\} = 0", Relation.ZERO),
    _C("S2", "after leader selection each leader x^j and its m_j - 1 sphere points sit in their own sequence "
             "only, once",
       r"\#\{j : x^j \text{ or a sphere point of } j \text{ is not private}\} = 0", Relation.ZERO),
    _C("S3", "after the collapse sequence j holds exactly m_j distinct points (its leader and sphere points)",
       r"\#\{j : \mathrm{set}(Z^j) \ne \{x^j\} \cup S^j\} = 0", Relation.ZERO),
    _C("I1", "output set of every sequence equals its target set (T(X^j) = Y^j)",
       r"\#\{j : T(X^j) \ne Y^j \text{ as sets}\} = 0", Relation.ZERO),
    _C("B1", "blocks L <= the paper's count (hardmax 2M + 2N + 1, softmax 2M + 3N)",
       r"L \le L_{\text{paper}}", Relation.LE),
    _C("B2", "blocks L <= 2M + N - 1 (hardmax) or 2M + N (softmax): this construction's count",
       r"L \le 2M + N - 1 \;\; (\text{softmax: } 2M + N)", Relation.LE),
    _C("B3", "feed-forward width d' <= 4", r"d' \le 4", Relation.LE),
    _C("X1", "after the line layer every token lies exactly on the line, inside a segment of one of its "
             "sequence's clusters, and every cluster gets a token (Arb balls)",
       r"\forall j, i:\; z^j_i \in \textstyle\bigcup_{s \in \mathrm{clusters}(j)} I_s", Relation.HOLDS),
    _C("X2", "on each cluster segment the remaining layers are one affine map equal to the target at both "
             "ends, hence constant (exact rationals)",
       r"\forall s:\; T_{\mathrm{rest}}|_{I_s} \equiv y_s", Relation.HOLDS),
)}
