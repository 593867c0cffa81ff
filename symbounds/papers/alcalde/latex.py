"""[AFZ25]'s own LaTeX: the ``interp`` document's body (the sizes of the built model against the
paper's block formulas, ``L = 2M + 2N + 1`` hardmax and ``2M + 3N`` softmax, the stage claims,
``||θ*||²`` and the regularised-training bounds ``loss ≤ ε ||θ*||²``).  Numbers and text are set
with :mod:`symbounds.core.tex`; the command line adds the document frame (``symbounds latex
interp``).
"""

from __future__ import annotations

from fractions import Fraction

import sympy

from ...core.exact import decimal
from ...core.tex import caption_text, decimal_tex, text_tex
from .run import thresholds

__all__ = ["INTERP_TITLE", "interp_body"]

INTERP_TITLE = "Exact sequence interpolation [AFZ25]: sizes and stages"


def interp_body(res) -> str:
    """Sizes, block counts against the paper's formulas and the stage claims of one
    :class:`~.run.InterpResult` (the body of the ``interp`` document, titled :data:`INTERP_TITLE`)."""
    ds, sz = res.dataset, res.sizes
    f = sz["blocks_formula"]
    att = res.options.attention
    formula_tex = {"K + 2M": "K + 2M", "K + M + ceil(M/4)": r"K + M + \lceil M/4 \rceil",
                   "K + 2M + 1": "K + 2M + 1"}.get(f["construction_text"], text_tex(f["construction_text"]))
    paper_tex = {"2M + 2N + 1": "2M + 2N + 1", "2M + 3N": "2M + 3N"}.get(f["paper_text"], text_tex(f["paper_text"]))
    out = [r"\subsection*{Dataset and model}",
           rf"$N = {ds.N}$ sequences in $\mathbb{{R}}^{{{ds.d}}}$, lengths $n_j \in [{min(ds.n)}, {max(ds.n)}]$, "
           rf"$M = \sum_j m_j = {ds.M}$ target points; {att} attention"
           + (rf" at temperature $\tau = {sympy.latex(sympy.Rational(res.options.tau.numerator, res.options.tau.denominator))}$"
              if att == "softmax" else f", {text_tex(res.construction.variant)} variant") + ".",
           "",
           r"\begin{center}", r"\small",
           r"\begin{tabular}{@{}lr>{\raggedright\arraybackslash}p{0.31\linewidth}@{}}", r"\toprule",
           r"quantity & built & formula \\", r"\midrule",
           rf"blocks $L$ & {sz['blocks']} & ${formula_tex}$ with $K = {f['K']}$ \\",
           rf"blocks, paper & {f['paper']} & ${paper_tex}$ \\",
           rf"token-wise ResNet blocks & {sz['resnet_blocks']} & distinct input tokens \\",
           rf"width $d'$ & {sz['width']} & $\le 4$ \\",
           rf"parameters (dense) & {sz['params_dense']} & \\",
           rf"parameters (non-zero) & {sz['params_nonzero']} & $\le (10d+8)L = {sz['params_bound']}$ \\",
           rf"largest numerator / denominator & {sz['max_numerator_bits']} / {sz['max_denominator_bits']} & bits \\",
           rf"$\|\theta^*\|^2$ & ${decimal_tex(decimal(res.theta_norm_sq, 15))}$ & exact rational, "
           rf"{res.theta_norm_sq.denominator.bit_length()}-bit denominator \\",
           r"\bottomrule", r"\end{tabular}", r"\end{center}", "",
           r"\subsection*{Stage claims}",
           r"\begin{center}", r"\small", r"\begin{tabular}{@{}ll>{\raggedright\arraybackslash}p{0.64\linewidth}@{}}",
           r"\toprule",
           r"claim & verdict & statement; measured \\", r"\midrule"]
    for c in res.claims:
        where = c.context + (f", {c.prec} bits" if c.prec else "")
        if c.claim is not None:
            caption = caption_text(c.statement)
            stmt = f"${c.claim.tex}$" + (rf"\newline{{\footnotesize {caption}}}" if caption else "")
        else:
            stmt = text_tex(c.statement)
        sides = text_tex(c.lhs or "") + (f" (bound {text_tex(c.rhs)})" if c.lhs and c.rhs else text_tex(c.rhs or ""))
        if sides:
            stmt += rf"\newline{{\footnotesize measured: {sides}}}"
        out.append(rf"{text_tex(c.id)} & {text_tex(c.verdict)} ({text_tex(where)}) & {stmt} \\")
    out += [r"\bottomrule", r"\end{tabular}", r"\end{center}", "",
            r"\subsection*{Regularised training}",
            r"If $\theta^*$ interpolates exactly, every minimiser $\theta_\varepsilon$ of "
            r"$\mathrm{loss}(\theta) + \varepsilon\|\theta\|^2$ has",
            r"\begin{align*}"]
    rows = []
    for t in thresholds(res):
        e = sympy.Rational(t["eps"])
        rows.append(rf"\varepsilon = {sympy.latex(e)}: \quad \mathrm{{loss}}(\theta_\varepsilon) &\le "
                    rf"\varepsilon\|\theta^*\|^2 \approx {decimal_tex(decimal(Fraction(t['loss_bound']), 15))}")
    out.append(" \\\\\n".join(rows))
    verdict = str(res.verdict)
    out += [r"\end{align*}", "",
            rf"Overall: \textbf{{{verdict}}}; exact interpolation of every sequence: "
            rf"\textbf{{{'yes' if res.exact else 'no'}}}."]
    return "\n".join(out)
