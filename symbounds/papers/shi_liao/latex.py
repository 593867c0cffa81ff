"""[SL26]'s own LaTeX: the ``pou`` document's body (every constant as its formula in the paper's
notation, from :mod:`.notation`, and its value; the lemma chain L1-L8, the ε budget E0-E3 and the
assumptions A1-A2 with their verdicts), and the ``tables`` document's body (the comparison with
earlier results and the manifold-versus-cube ablation, from :mod:`.tables`).  Numbers, text and
claims are set with :mod:`symbounds.core.tex`; the command line adds the document frame
(``symbounds latex pou|tables``).

Notation (paper symbol → code / LaTeX):

=====================  ====================  ==========================================
paper                  code                  LaTeX
=====================  ====================  ==========================================
``r_g``                ``r_g``               ``r_g``
``M_g``                ``M_g``               ``M_g``
``c``                  ``c``                 ``c = 1 - \\cos(2\\pi/P)``
``e^{-cM}``            ``emcM``              ``e^{-cM}``
``η(M)``, ``λ(M)``     ``eta``, ``lambda``   ``\\eta(M)``, ``\\lambda(M)``
``w_ind``              ``w_ind``             ``w_{\\mathrm{ind}}``
=====================  ====================  ==========================================

Constants are printed as exact rationals when rational, else as ``≈`` decimals rounded to 15
significant digits.  ``sympy.latex`` is used for formulas only; ``log(x, 2)`` (printed by SymPy
1.14 as ``\\log x / \\log 2``) does not occur in these formulas.
"""

from __future__ import annotations

import re

import sympy

from ...core.contexts import BallContext
from ...core.tex import ball_tex, booktabs, claim_block, columns, decimal_tex, text_tex, tol_definition, value_tex
from . import tables as T
from .notation import NAMES, notation_formulas, tex_formula

__all__ = ["POU_TITLE", "TABLES_TITLE", "pou_body", "tables_body", "order_tex", "remark_tex"]

POU_TITLE = "Softmax partition of unity [SL26]: constants and lemma chain"
TABLES_TITLE = "[SL26]: comparison and ablation tables"


def pou_body(res) -> str:
    """The constants and the lemma chain of one :class:`~.run.PouResult` (the body of the
    ``pou`` document, titled :data:`POU_TITLE`)."""
    inst, K = res.instance, res.K
    base = inst if hasattr(inst, "alpha") else inst.inst
    nf = notation_formulas()
    exact = K.table()
    consts = res.constants
    out = [r"\subsection*{Instance}",
           rf"$d = {base.d}$, $\alpha = {sympy.latex(base.alpha)}$, $C_H = {sympy.latex(base.C_H)}$, "
           rf"$B = {sympy.latex(base.B)}$, $\varepsilon = {sympy.latex(base.eps)}$, target "
           rf"\texttt{{{text_tex(base.target_text)}}}"
           + (rf", $M = {sympy.latex(base.M)}$ (user)" if base.M is not None else "")
           + (rf", $M_g = {sympy.latex(base.M_g)}$ (user)" if base.M_g is not None else "") + ".",
           "",
           r"\subsection*{Constants}",
           r"Each constant in the paper's notation (SymPy), then its value at the instance: exact when "
           r"rational or algebraic, otherwise rounded to 15 significant digits from a certified enclosure.",
           r"\begin{align*}"]
    rows = []
    ball = BallContext(max(res.prec, 128))
    for name in ("r_g", "m", "P", "P_paper", "M_g", "c", "S", "M", "emcM", "eta", "lambda", "w_ind", "D", "d_ff",
                 "heads_1", "heads_2"):
        if name not in consts and name != "S":
            continue
        lhs = NAMES[name]
        formula = nf.get(name)
        if name == "S":
            env = res.model.definition_values(ball)
            with ball.scope():
                s_val = ball.from_sympy(sympy.exp(K.M) / K.eta, env=env)
                value = r"\approx " + decimal_tex(s_val.mid().str(30, radius=False))
        elif name in exact and isinstance(exact[name], sympy.Basic) and exact[name].is_number \
                and not exact[name].is_Rational and exact[name].is_algebraic:
            value = "= " + sympy.latex(exact[name]) + r" \approx " + decimal_tex(consts[name])
        elif "/" in consts[name] or re.fullmatch(r"-?\d+", consts[name]):
            value = "= " + ball_tex(consts[name])
        else:
            value = r"\approx " + decimal_tex(consts[name])
        if formula is not None and formula.is_number and value.startswith("= "):
            rows.append(rf"{lhs} &{value}")  # a constant: its formula is its value (H^2 = 1), once
        elif name in ("M", "M_g") and getattr(base, {"M": "M", "M_g": "M_g"}[name]) is not None:
            rows.append(rf"{lhs} &= {sympy.latex(getattr(base, name))} \quad\text{{(user; derived: }} "
                        rf"{tex_formula(formula)}\text{{)}}")
        else:
            rows.append(rf"{lhs} &= {tex_formula(formula)} {value}" if formula is not None else rf"{lhs} &{value}")
    out.append(" \\\\\n".join(rows))
    out += [r"\end{align*}", "",
            r"\subsection*{Size}",
            r"\begin{align*}",
            rf"\#\text{{params}} &= {consts['params_dense']} \text{{ (dense)}}, \quad {consts['params_nonzero']}"
            r"\text{ (non-zero)} \\",
            rf"\max|w| &\approx {decimal_tex(consts['max_weight'])} \quad\text{{(measured)}} \\",
            rf"\varepsilon^{{-2d/\alpha}}\log(1/\varepsilon) &\approx {decimal_tex(consts['max_weight_paper_order'])}"
            r" \quad\text{(the paper's order of } \max|w|\text{)}",
            r"\end{align*}", ""]
    n_proved = sum(c.verdict == "proved" for c in res.claims)
    verdict = str(res.verdict)
    out += [r"\subsection*{Lemma chain L1--L8 and the $\varepsilon$ budget E0--E3}",
            rf"Verdicts from \texttt{{symbounds pou}}: Arb balls (up to {res.prec} bits), exact arithmetic or SymPy; "
            rf"{res.samples} sample points. Each side is a certified enclosure $[m \pm r]$. "
            rf"Overall: \textbf{{{verdict}}} ({n_proved} of {len(res.claims)} claims proved)."]
    tol_ids = [c.id for c in res.claims if c.claim is not None and r"\mathrm{tol}" in c.claim.tex]
    if tol_ids:
        out += ["", tol_definition(tol_ids)]
    out.append(r"\begin{description}")
    order = lambda c: (0 if c.scope == "lemma" else 1 if c.scope == "budget" else 2)
    for c in sorted(res.claims, key=order):
        out.append(claim_block(c))
    out += [r"\end{description}", "",
            r"Largest measured error at the sample points:",
            r"\begin{equation*}", rf"\max_x |T(x)-g(x)| \in {value_tex(res.max_error_value)}.", r"\end{equation*}"]
    return "\n".join(out)


_ORDER_TOKENS = re.compile(r"poly log|log|eps|alpha")


def order_tex(s: str) -> str:
    """An order as written in the data (``O(eps^{-d/alpha} log(1/eps))``) as LaTeX math."""
    rep = {"poly log": r"\operatorname{poly}\log", "log": r"\log", "eps": r"\varepsilon", "alpha": r"\alpha"}
    body = _ORDER_TOKENS.sub(lambda m: rep[m.group(0)] + (" " if m.group(0) in ("poly log", "log") else ""), s)
    return "$" + body + "$"



_ABLATION_HEAD = {
    "manifold": "manifold", "d": "$d$", "ambient": r"$\bar D$", "eps": r"$\varepsilon$", "C_H": "$C_H$",
    "P_net": r"$P_{\mathrm{net}}$", "params_net": r"params$_{\mathrm{net}}$",
    "P_net_paper": r"$C_M(16C_H)^{d/\alpha}\varepsilon^{-d/\alpha}$", "P_cube": r"$P_{\mathrm{cube}}$",
    "params_cube": r"params$_{\mathrm{cube}}$",
    "P_cube_paper": r"$\bar D^{\bar D/2}(8C_H)^{\bar D/\alpha}\varepsilon^{-\bar D/\alpha}$",
    "alpha": r"$\alpha$", "slope_net": "slope (net)", "d/alpha": r"$d/\alpha$", "slope_cube": "slope (cube)",
    "D/alpha": r"$\bar D/\alpha$",
}


#: plain-text notation of the "measured here" remark -> LaTeX (longest first)
_REMARK_TEX = [
    ("eps^{-2d/alpha} log(1/eps)", r"$\varepsilon^{-2d/\alpha}\log(1/\varepsilon)$"),
    ("|T - g| <= eps", r"$|T - g| \le \varepsilon$"), ("1/eps", r"$1/\varepsilon$"),
    ("eps=1/10", r"$\varepsilon = 1/10$"), ("R^10", r"$\mathbb{R}^{10}$"), ("S^2", "$S^2$"),
    ("L1-L8", "L1--L8"), ("d=1", "$d = 1$"), ("P=40", "$P = 40$"), (" = 230", " $= 230$"),
]


def remark_tex(text: str) -> str:
    """The plain-text remark of :data:`symbounds.papers.shi_liao.tables.COMPARISON` as LaTeX text:
    its formulas (``eps^{-2d/alpha}``, ``R^10``, ``<=``) in math, numbers like ``3.69e4`` as
    ``3.69\\times 10^{4}``, the rest escaped."""
    pieces = [text]
    for plain, tex in _REMARK_TEX:
        nxt = []
        for i, piece in enumerate(pieces):
            if isinstance(piece, tuple):
                nxt.append(piece)
                continue
            parts = piece.split(plain)
            for k, part in enumerate(parts):
                if k:
                    nxt.append((tex,))
                nxt.append(part)
        pieces = nxt
    out = []
    for piece in pieces:
        if isinstance(piece, tuple):
            out.append(piece[0])
        else:
            t = text_tex(piece)
            out.append(re.sub(r"(\d(?:\.\d+)?)e(\d+)", r"$\1\\times 10^{\2}$", t))
    return "".join(out)


def tables_body() -> str:
    """[SL26]'s comparison table and the ablation (docs/shi_liao.md, Manifolds) (manifold net against
    the ambient cube), booktabs, from :mod:`.tables` (the body of the ``tables`` document, titled
    :data:`TABLES_TITLE`)."""
    comparison = T.COMPARISON
    cols = ("work", "attention", "positions", "depth", "parameters", "domain")
    rows = []
    for r in comparison:
        rows.append({c: (order_tex(r[c]) if c in ("depth", "parameters")
                         else text_tex(r[c]).replace("Hoelder", r"H\"older")) for c in cols})
    out = [r"\subsection*{Comparison with earlier Transformer approximation results}",
           r"\begin{table}[h]\centering\small",
           r"\resizebox{\linewidth}{!}{%",
           *booktabs(cols, [text_tex(c) for c in cols], rows),
           r"}",
           r"\caption{Transformers approximating $\alpha$-H\"older functions to accuracy $\varepsilon$: "
           r"depth and parameters as stated by each work, as compared by Shi \& Liao [SL26].}",
           r"\end{table}"]
    measured = [r for r in comparison if r.get("measured here") and r.get("measured here") != "not reproduced"]
    for r in measured:
        out.append(rf"\noindent\textbf{{Measured here for {text_tex(r['work'])}:}} {remark_tex(r['measured here'])}")
        out.append("")
    acols = tuple(T.ABLATION_COLUMNS)
    arows = columns(T.ABLATION)
    out += [r"\subsection*{Ablation: a net of the manifold against a grid of the ambient cube}",
            r"\begin{table}[h]\centering\small",
            r"\resizebox{\linewidth}{!}{%",
            *booktabs(acols, [_ABLATION_HEAD.get(c, text_tex(c)) for c in acols], arows,
                       "l" + "r" * (len(acols) - 1)),
            r"}",
            r"\caption{Tokens $P$ and dense parameters of the two-block network: centres on an "
            r"$r_g$-net of the manifold (grows with the intrinsic $d$) against the grid of "
            r"$[0,1]^{\bar D}$ (grows with $\bar D$), beside the bounds of [SL26]; $\alpha = 1$. "
            r"Counts are of the built networks (docs/shi\_liao.md, Manifolds).}",
            r"\end{table}"]
    scols = tuple(T.SLOPE_COLUMNS)
    srows = columns(T.SLOPES)
    out += [r"\begin{table}[h]\centering\small",
            *booktabs(scols, [_ABLATION_HEAD.get(c, text_tex(c)) for c in scols], srows,
                       "l" + "r" * (len(scols) - 1)),
            r"\caption{Least-squares slope of $\log P$ against $\log(1/\varepsilon)$, "
            r"$\varepsilon = 2^{-4}, \ldots, 2^{-12}$, beside the exponents $d/\alpha$ and $\bar D/\alpha$ "
            r"of [SL26] (docs/shi\_liao.md, Manifolds).}",
            r"\end{table}"]
    return "\n".join(out)
