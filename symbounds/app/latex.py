"""LaTeX of constants, lemma chains and tables (``symbounds latex pou|interp|tables|KEY``).

The documents, each standalone (``article`` with ``amsmath``, ``booktabs``, ``graphicx``,
``lmodern``) or a fragment for ``\\input`` (``fragment=True``) whose first lines name the packages it
needs (:data:`PACKAGES`); a fragment fits the text width of a plain ``article``.  Each claim is
shown once, as its declared display in the paper's notation, with the words of its plain
statement that the display does not say as a short caption (:func:`caption_text`).

``pou``
    Shi & Liao [SL26] at one instance: every constant (docs/shi_liao.md, Constants) as its formula in the paper's
    notation (built with SymPy, and checked against :func:`symbounds.papers.shi_liao.symbolic_constants`
    by :func:`formulas_agree`) and its value; then the lemma chain L1–L8, the ε budget E0–E3 and
    the assumptions A1–A2 as displayed inequalities, each with its verdict, the context that
    decided it, and the two certified sides.  The numbers come from one
    :func:`symbounds.papers.shi_liao.run.run`.
``interp``
    Alcalde, Fantuzzi & Zuazua [AFZ25] on one dataset: the sizes of the built model against the
    paper's block formulas (``L = 2M + 2N + 1`` hardmax, ``2M + 3N`` softmax), the stage claims,
    ``||θ*||²`` and the regularised-training bounds ``loss ≤ ε ||θ*||²``.  From
    :func:`symbounds.papers.alcalde.run.run`.
``tables``
    [SL26]'s comparison table and the manifold-versus-cube ablation (docs/shi_liao.md, Manifolds) (and the
    slopes of ``log P`` against ``log(1/ε)``), typeset with ``booktabs``; the data are those of
    :mod:`symbounds.papers.tables`.
``KEY``
    Any construction of the catalogue at one instance (``NAME=VALUE ...`` or ``--example K``):
    its citation, the instance, the construction's own sections (its ``Paper.latex`` hook) and
    every claim with its verdict (:func:`paper_latex`).

The formulas of [SL26]'s constants in the paper's notation are
:mod:`symbounds.papers.shi_liao.notation`'s (imported here for ``pou``).

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

Numbers.  A certified side printed as ``[m ± r]`` is an Arb ball re-rounded to 10 digits with
:meth:`flint.arb.str`, which widens the radius so the printed ball still contains the value;
constants are printed as exact rationals when rational, else as ``≈`` decimals rounded to 15
significant digits.  ``sympy.latex`` is used for formulas only; ``log(x, 2)`` (printed by SymPy
1.14 as ``\\log x / \\log 2``) does not occur in these formulas.
"""

from __future__ import annotations

import re
from fractions import Fraction

import flint
import sympy

from ..core.claims import RELATION_TEX
from ..core.contexts import BallContext
from ..core.exact import as_fraction, decimal
from ..core.files import atomic_write, check_writable
from ..papers.alcalde.dataset import load_dataset
from ..papers.alcalde.run import InterpOptions, thresholds
from ..papers.alcalde.run import run as interp_run
from ..papers.shi_liao import tables as T
from ..papers.shi_liao.notation import NAMES, formulas_agree, notation_formulas, tex_formula
from ..papers.shi_liao.run import PouOptions, run
from .args import UsageError, add_instance_args, instance, precision, random_interp_dataset, written

__all__ = [
    "pou_latex", "interp_latex", "tables_latex", "notation_formulas", "formulas_agree", "ball_tex", "decimal_tex",
    "document", "add_latex_arguments", "run_latex", "value_tex", "paper_latex",
]

# ------------------------------------------------------------------------------------------
# notation and number formatting

_SCI = re.compile(r"^([-+]?\d+(?:\.\d+)?)e([-+]?\d+)$")


def decimal_tex(text: str, digits: int = 15) -> str:
    """A decimal string (``"1743.486313696330206"``, ``"4.76e-10"``) rounded to ``digits``
    significant digits, as LaTeX math (``4.76\\times 10^{-10}``)."""
    with flint.ctx.workprec(256):
        s = flint.arb(text).str(digits, radius=False)
    m = _SCI.match(s)
    if m:
        return rf"{m.group(1)}\times 10^{{{int(m.group(2))}}}"
    return s


def ball_tex(text: str, digits: int = 10) -> str:
    """An Arb ball printed as ``[m +/- r]`` (or an exact number) re-rounded to ``digits`` digits, as
    LaTeX: ``[m \\pm r]``.  The re-rounding widens the radius (Arb's ``str``), so the printed ball
    still encloses the value."""
    t = (text or "").strip()
    if not t:
        return ""
    if re.fullmatch(r"-?\d+", t):
        return t
    if "/" in t and "[" not in t:
        p, q = t.split("/")
        return rf"\tfrac{{{p.strip()}}}{{{q.strip()}}}"
    with flint.ctx.workprec(256):
        s = flint.arb(t).str(digits)

    def num(x):
        x = x.strip()
        m = _SCI.match(x)
        return rf"{m.group(1)}\times 10^{{{int(m.group(2))}}}" if m else x

    if s.startswith("["):
        mid, _, rad = s[1:-1].partition("+/-")
        if not mid.strip():
            return rf"[0 \pm {num(rad)}]"
        return rf"[{num(mid)} \pm {num(rad)}]"
    return num(s)


def text_tex(s) -> str:
    """Plain text escaped for LaTeX."""
    s = str(s)
    rep = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
           "}": r"\}", "[": "{[}", "]": "{]}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}
    return "".join(rep.get(ch, ch) for ch in s)


# ------------------------------------------------------------------------------------------
# the claims as displayed inequalities

#: plain-text names of Greek letters in claim statements
_GREEK = {"alpha": r"\alpha", "eta": r"\eta", "lambda": r"\lambda", "delta": r"\delta", "theta": r"\theta",
          "pi": r"\pi", "eps": r"\varepsilon"}
_SIMPLE = re.compile(r"^([A-Za-z]+|\d+)([_^])([A-Za-z0-9]+)(-[a-z]+)?([,;:.]?)$")
_OP = {"-", "+"}


def _segments(s: str) -> list:
    """Top-level text outside and inside parentheses, in order."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "(" and depth == 0:
            out.append(cur)
            cur, depth = "", 1
        elif ch == "(":
            depth += 1
            cur += ch
        elif ch == ")" and depth == 1:
            out.append(cur)
            cur, depth = "", 0
        else:
            if ch == ")" and depth:
                depth -= 1
            cur += ch
    out.append(cur)
    return [x.strip() for x in out if x.strip()]


def _token(tok: str) -> tuple:
    """``('word', text)``, ``('math', latex)`` or ``('break', None)``."""
    core = tok.rstrip(",;:.")
    if core == "a" or (re.fullmatch(r"[A-Za-z][A-Za-z0-9]+(-[A-Za-z0-9]+)*", core) and core not in _GREEK
                       and core not in ("exp", "sqrt", "log", "sum", "cos", "sin", "tol", "ind", "params")):
        return ("word", tok)
    if re.fullmatch(r"\d+", core) or core in _OP or re.fullmatch(r"(?!a$)[A-Za-z]", core):
        return ("math", core)
    m = _SIMPLE.match(tok)
    if m:
        base, op, idx, tail, _ = m.groups()
        return ("math", f"{_GREEK.get(base, base)}{op}{{{_GREEK.get(idx, idx)}}}" + (f"$-{{}}{tail[1:]}$" if tail else ""))
    return ("break", None)


def caption_text(statement: str) -> str:
    """The words of a claim's plain statement that its LaTeX display does not say, as LaTeX text
    (``""`` when the statement is only a formula).

    The statement (``'|g| <= B on a 257^1 grid'``) is cut at formulas: words are kept, simple
    symbols (``p_j``, ``257^1``, ``x``) are set in math, and anything else (``|g|``, ``<=``,
    ``exp(...)``) ends a phrase; phrases of at least three words, and labels ending with ``:``, are
    kept (``'on a $257^{1}$ grid'``).  The raw ASCII statement itself is never printed."""
    runs = []
    segs = _segments(statement)
    for i, seg in enumerate(segs):
        run = []
        last = i == len(segs) - 1 or statement.rstrip().endswith(")")
        for tok in seg.split() + [None]:
            kind, val = _token(tok) if tok is not None else (("end" if last else "break"), None)
            if kind in ("break", "end"):
                while run and run[0][0] == "math":
                    run.pop(0)
                while run and ((run[-1][0] == "math" and (run[-1][1] in _OP or kind == "break" and not (
                        run[-1][1].isdigit() and len(run) > 1 and run[-2][0] == "word"
                        and not run[-2][1].endswith(":"))))
                               or (kind == "break" and run[-1][1] in ("the", "a", "an", "of", "to", "and"))):
                    run.pop()
                words = [v for k, v in run if k == "word"]
                if len(words) >= 3 or (words and run[-1][1].endswith(":")):
                    runs.append(run)
                run = []
            else:
                run.append((kind, val))
    out = []
    for run in runs:
        parts, math = [], []
        for kind, val in run + [("word", "")]:
            if kind == "math":
                math.append(val)
                continue
            if math:
                expr = " ".join(math)
                if "$-{}" in expr:
                    head, _, tail = expr.partition("$-{}")
                    parts.append(f"${head}$-{tail.rstrip('$')}")
                else:
                    parts.append(f"${expr}$")
                math = []
            if val:
                parts.append(text_tex(val))
        out.append(" ".join(parts).rstrip(",;:."))
    return "; ".join(out).replace("Hoelder", r"H\"older")


def value_tex(v, digits: int = 10) -> str:
    """A number as LaTeX: an Arb ball as ``[m \\pm r]`` re-rounded to ``digits`` digits (Arb's
    ``str`` widens the radius, so the printed ball still encloses the value); an exact rational as
    an integer or ``\\tfrac{p}{q}``; "" for anything else."""
    if isinstance(v, flint.arb):
        with flint.ctx.workprec(max(64, 4 * digits + 32)):
            return ball_tex(v.str(digits), digits)
    try:
        q = as_fraction(v)
    except (AttributeError, TypeError):
        return ""
    if q.denominator == 1:
        return str(q.numerator)
    if len(str(q.numerator)) + len(str(q.denominator)) > 2 * digits:
        return decimal_tex(decimal(q, digits), digits)
    return ball_tex(f"{q.numerator}/{q.denominator}")


def tol_tex(prec) -> str:
    """``tol`` of a claim decided at ``prec`` bits, as LaTeX: :func:`symbounds.papers.shi_liao.claims.tolerance`
    is ``2^{-⌊p/2⌋}`` with ``p = prec`` (``p = 53`` when the context has no precision)."""
    return rf"2^{{-{(prec or 53) // 2}}}"


def tol_definition(ids) -> str:
    """The sentence that defines ``tol`` for the claims ``ids`` that use it."""
    which = ", ".join(ids[:-1]) + (" and " if len(ids) > 1 else "") + ids[-1]
    return (rf"In {text_tex(which)}, $\mathrm{{tol}} = 2^{{-\lfloor p/2 \rfloor}}$ is the tolerance "
            r"``to working precision'': $p$ is the precision in bits of the arithmetic that decided the "
            r"claim ($p = 53$ when it has none), so $\mathrm{tol} = 2^{-64}$ at 128 bits.  These claims "
            r"are identities of the construction; $\mathrm{tol}$ only absorbs the rounding of the "
            r"forward pass, and its value is printed beside each of them.")


def _claim_block(c) -> str:
    """One claim: id, verdict, the deciding context and (when it adds something) the words of its
    plain statement as a short caption; then its declared statement in the paper's notation and
    the two measured sides joined by the declared relation."""
    where = c.context + (f", {c.prec} bits" if c.prec else "")
    if c.claim is not None:
        stmt, caption = c.claim.tex, caption_text(c.statement)
    else:
        stmt, caption = r"\text{" + text_tex(c.statement) + "}", ""
    if r"\mathrm{tol}" in stmt:
        stmt += rf", \quad \mathrm{{tol}} = {tol_tex(c.prec)}"
    head = rf"\item[\textbf{{{text_tex(c.id)}}}] \textsc{{{text_tex(c.verdict)}}} ({text_tex(where)})" \
        + (f": {caption}" if caption else "")
    lines = [head, r"\begin{equation*}", stmt, r"\end{equation*}"]
    lhs = value_tex(c.lhs_value) if c.lhs_value is not None else ball_tex(c.lhs)
    rhs = value_tex(c.rhs_value) if c.rhs_value is not None else ball_tex(c.rhs)
    if lhs and rhs:
        rel = RELATION_TEX.get(c.relation, r"\;\text{vs}\;")
        lines += [r"\begin{equation*}", rf"{lhs} \;{rel}\; {rhs}", r"\end{equation*}"]
    elif lhs:
        lines += [r"\begin{equation*}", rf"\text{{measured: }} {lhs}", r"\end{equation*}"]
    if c.note:
        lines.append(r"\emph{" + text_tex(c.note) + "}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# documents

_PREAMBLE = r"""\documentclass[11pt]{article}
\usepackage[T1]{fontenc}
\usepackage{lmodern}
\usepackage[margin=2cm]{geometry}
\usepackage{amsmath,amssymb}
\usepackage{booktabs}
\usepackage{graphicx}
\usepackage{array}
\allowdisplaybreaks
\begin{document}
"""


#: LaTeX packages each document's body needs (a fragment lists them in its first line)
PACKAGES = {
    "pou": ("amsmath", "amssymb"),
    "interp": ("amsmath", "amssymb", "booktabs", "array"),
    "tables": ("amsmath", "amssymb", "booktabs", "graphicx"),
    "paper": ("amsmath", "amssymb"),
    "chain": ("amsmath", "amssymb"),
    "class": ("amsmath", "amssymb"),
}


def document(body: str, fragment: bool = False, title: str | None = None, what: str | None = None) -> str:
    """``body`` as a standalone ``article`` (default) or as a fragment for ``\\input``, whose first
    line is a comment naming the packages it needs (:data:`PACKAGES` of ``what``)."""
    if fragment:
        head = ""
        if what:
            head = (f"% symbounds latex {what} --fragment: \\input this in a document that loads\n"
                    f"% \\usepackage{{{','.join(PACKAGES.get(what, PACKAGES['paper']))}}}\n")
        return head + body.rstrip() + "\n"
    head = _PREAMBLE + (rf"\section*{{{title}}}" + "\n" if title else "")
    return head + body.rstrip() + "\n\\end{document}\n"


def pou_latex(res, fragment: bool = False) -> str:
    """The constants and the lemma chain of one :class:`symbounds.papers.shi_liao.run.PouResult`."""
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
        out.append(_claim_block(c))
    out += [r"\end{description}", "",
            r"Largest measured error at the sample points:",
            r"\begin{equation*}", rf"\max_x |T(x)-g(x)| \in {value_tex(res.max_error_value)}.", r"\end{equation*}"]
    return document("\n".join(out), fragment, title="Softmax partition of unity [SL26]: constants and lemma chain", what="pou")


def interp_latex(res, fragment: bool = False) -> str:
    """Sizes, block counts against the paper's formulas and the stage claims of one
    :class:`symbounds.papers.alcalde.run.InterpResult`."""
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
    return document("\n".join(out), fragment, title="Exact sequence interpolation [AFZ25]: sizes and stages", what="interp")


# --- tables: the comparison and the ablation -----------------------------------------------------------

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


def _cell(v) -> str:
    if isinstance(v, str) and re.fullmatch(r"-?\d+/\d+", v):
        p, q = v.split("/")
        return rf"${'-' if p.startswith('-') else ''}\tfrac{{{p.lstrip('-')}}}{{{q}}}$"
    if isinstance(v, float):
        return f"{v:.4g}".replace("e+", "e")
    return text_tex(v)


def sci_tex(v, digits: int = 3) -> str:
    """``v`` in scientific notation with ``digits`` significant digits, as LaTeX math
    (``1.38\\times 10^{11}``); exact integers are rounded from their exact value."""
    if isinstance(v, int):
        text = decimal(Fraction(v), digits)
    else:
        text = f"{v:.{digits - 1}e}"
    mant, _, exp = f"{float(text):.{digits - 1}e}".partition("e")
    return rf"{mant}\times 10^{{{int(exp)}}}"


def column_cells(values: list) -> list:
    """One number format per table column: a column of numbers reaching ``10^6`` is printed in
    scientific notation with 3 significant digits (``1.38\\times 10^{11}``); a column of
    integers below that as integers; a column of floats with the same number of decimals (the most
    any entry has, at most 4); anything else (names, exact fractions) as :func:`_cell`."""
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) != len(values):
        return [_cell(v) for v in values]
    if max(abs(v) for v in nums) >= 1e6:
        return [f"${sci_tex(v)}$" for v in nums]
    if all(isinstance(v, int) for v in nums):
        return [str(v) for v in nums]
    places = min(4, max(len(repr(float(v)).partition(".")[2].rstrip("0")) for v in nums))
    return [f"{float(v):.{places}f}" for v in nums]


def _columns(rows) -> list:
    """``rows`` (tuples) with each column formatted by :func:`column_cells`."""
    cols = [column_cells([r[i] for r in rows]) for i in range(len(rows[0]))]
    return [[col[j] for col in cols] for j in range(len(rows))]


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


def _booktabs(columns, head, rows, align=None) -> list:
    align = align or "l" * len(columns)
    out = [r"\begin{tabular}{" + align + "}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    for r in rows:
        vals = [r[c] for c in columns] if isinstance(r, dict) else list(r)
        out.append(" & ".join(vals) + r" \\")
    return out + [r"\bottomrule", r"\end{tabular}"]


def tables_latex(fragment: bool = False) -> str:
    """[SL26]'s comparison table and the ablation (docs/shi_liao.md, Manifolds) (manifold net against the ambient cube),
    booktabs, from :mod:`symbounds.papers.tables`."""
    comparison = T.COMPARISON
    cols = ("work", "attention", "positions", "depth", "parameters", "domain")
    rows = []
    for r in comparison:
        rows.append({c: (order_tex(r[c]) if c in ("depth", "parameters")
                         else text_tex(r[c]).replace("Hoelder", r"H\"older")) for c in cols})
    out = [r"\subsection*{Comparison with earlier Transformer approximation results}",
           r"\begin{table}[h]\centering\small",
           r"\resizebox{\linewidth}{!}{%",
           *_booktabs(cols, [text_tex(c) for c in cols], rows),
           r"}",
           r"\caption{Transformers approximating $\alpha$-H\"older functions to accuracy $\varepsilon$: "
           r"depth and parameters as stated by each work, as compared by Shi \& Liao [SL26].}",
           r"\end{table}"]
    measured = [r for r in comparison if r.get("measured here") and r.get("measured here") != "not reproduced"]
    for r in measured:
        out.append(rf"\noindent\textbf{{Measured here for {text_tex(r['work'])}:}} {remark_tex(r['measured here'])}")
        out.append("")
    acols = tuple(T.ABLATION_COLUMNS)
    arows = _columns(T.ABLATION)
    out += [r"\subsection*{Ablation: a net of the manifold against a grid of the ambient cube}",
            r"\begin{table}[h]\centering\small",
            r"\resizebox{\linewidth}{!}{%",
            *_booktabs(acols, [_ABLATION_HEAD.get(c, text_tex(c)) for c in acols], arows,
                       "l" + "r" * (len(acols) - 1)),
            r"}",
            r"\caption{Tokens $P$ and dense parameters of the two-block network: centres on an "
            r"$r_g$-net of the manifold (grows with the intrinsic $d$) against the grid of "
            r"$[0,1]^{\bar D}$ (grows with $\bar D$), beside the bounds of [SL26]; $\alpha = 1$. "
            r"Counts are of the built networks (docs/shi\_liao.md, Manifolds).}",
            r"\end{table}"]
    scols = tuple(T.SLOPE_COLUMNS)
    srows = _columns(T.SLOPES)
    out += [r"\begin{table}[h]\centering\small",
            *_booktabs(scols, [_ABLATION_HEAD.get(c, text_tex(c)) for c in scols], srows,
                       "l" + "r" * (len(scols) - 1)),
            r"\caption{Least-squares slope of $\log P$ against $\log(1/\varepsilon)$, "
            r"$\varepsilon = 2^{-4}, \ldots, 2^{-12}$, beside the exponents $d/\alpha$ and $\bar D/\alpha$ "
            r"of [SL26] (docs/shi\_liao.md, Manifolds).}",
            r"\end{table}"]
    return document("\n".join(out), fragment, title="[SL26]: comparison and ablation tables", what="tables")


# ------------------------------------------------------------------------------------------
# command line


def paper_latex(paper, values: dict, proof, inst=None, fragment: bool = False) -> str:
    """Any catalogue construction at one instance: its citation, the instance's parameters, the
    construction's own sections (:attr:`Paper.latex <symbounds.core.paper.Paper>`, when it has
    them), then every claim with its verdict, as in the other documents."""
    out = [text_tex(paper.citation) + r"\par", "", r"\subsection*{Instance}", r"\begin{itemize}"]
    out += [rf"\item \texttt{{{text_tex(k)}}} $=$ \texttt{{{text_tex(v)}}}" for k, v in values.items()]
    if not values:
        out.append(r"\item (the defaults)")
    out += [r"\end{itemize}", ""]
    for title, body in (paper.latex(inst, proof) if paper.latex is not None else []):
        out += [rf"\subsection*{{{text_tex(title)}}}", body.rstrip(), ""]
    out += [r"\subsection*{Claims}", r"\begin{description}"]
    out += [_claim_block(c) for c in proof.results]
    out += [r"\end{description}", "", rf"\noindent Verdict: \textsc{{{text_tex(proof.verdict)}}}."]
    return document("\n".join(out), fragment, title=paper.title, what=paper.key)


def chain_latex(rows, fragment: bool = False) -> str:
    """``symbounds chain`` as a lemma list: each claim of the ε budget and the size bounds of [SL26]
    with the region where it holds for every parameter, its verdict, the checked proof steps, and
    for a refuted claim its certified parameter point (docs/shi_liao.md, The constant chain for
    every parameter)."""
    from ..papers.shi_liao.parametric import BOUNDS, REGION_TEX

    out = [r"\noindent Every parameter of the region $" + REGION_TEX + r"$ is covered, with the derived constants "
           r"$r_g=(\varepsilon/(4C_H))^{1/\alpha}$, $m=\lceil \sqrt d/(2r_g)\rceil$, $P=m^d$, "
           r"$M_g=\log(8BP/\varepsilon)/(3r_g^2)$, $M=\log(4(P-1)B(36dM_g+2)/\varepsilon)/c$ substituted "
           r"symbolically; each step below was decided by SymPy when the table was built.",
           "", r"\medskip\noindent\textbf{Certified bounds on $\exp$.}", r"\begin{itemize}"]
    for bd in BOUNDS.values():
        out.append(rf"\item $" + bd.tex + r"$: " + text_tex(bd.proof) + ".")
    out.append(r"\end{itemize}")
    for r in rows:
        where = r"the whole region" if r.region == "all" else "the region with $" + r.region_tex + "$"
        out += ["", rf"\medskip\noindent\textbf{{Lemma {text_tex(r.id)}}} ({text_tex(r.verdict)}"
                    + ("; proved on " + where if r.verdict == "refuted" else "") + r"). "
                    + (rf"For every parameter of {where}:" if r.verdict != "open" else "Open:"),
                r"\[" + r.tex + r"\]"]
        if r.equality:
            out.append(r"Equality: " + text_tex(r.equality) + ".")
        if r.criterion_tex:
            out += [r"Exactly:", r"\[" + r.criterion_tex + r"\]"]
        if r.refuted_at:
            a = r.refuted_at
            out.append(rf"\emph{{Refuted}} at $d={a['d']}$, $\alpha={ball_tex(a['alpha'])}$, $C_H={ball_tex(a['holder'])}$, "
                       rf"$B={ball_tex(a['bound'])}$, $\varepsilon={ball_tex(a['eps'])}$ ($P={a['P']}$): "
                       rf"$t\in{ball_tex(a['t'])}$ and the left side lies in ${ball_tex(a['lhs'])} > \varepsilon/4$ "
                       r"(Arb, 256 bits); \texttt{symbounds pou} refutes it there too.")
        if r.open_region:
            out.append(r"\emph{Left open:} " + text_tex(r.open_region) + ".")
        out += [r"\begin{itemize}\small"]
        out += [(r"\item[$\checkmark$] " if ok else r"\item[?] ") + text_tex(st) for st, ok in r.steps]
        out.append(r"\end{itemize}")
    return document("\n".join(out), fragment, title="The constant chain of [SL26] for every parameter", what="chain")


def add_latex_arguments(parser) -> None:
    """Flags of ``symbounds latex pou|interp|tables|tighten|chain|class|KEY [instance] --out FILE.tex [--fragment]``."""
    from ..papers import CATALOGUE
    from .catalogue_cli import add_paper_arguments

    parser.add_argument("what", choices=["pou", "interp", "tables", "tighten", "chain", "class", *CATALOGUE],
                        help="which document (KEY: any construction of 'symbounds prove --list')")
    add_paper_arguments(parser)
    parser.add_argument("--certificate", default=None, metavar="CERT.json",
                        help="class: a class certificate (default: certify the class of the instance flags)")
    parser.add_argument("--table", default=None, metavar="T.json",
                        help="tighten: a tighten sweep table or report; class: a tighten --class --json report "
                             "(its minima)")
    add_instance_args(parser)
    parser.add_argument("--points", type=int, default=8, help="pou: random sample points (default 8)")
    parser.add_argument("--prec", type=int, default=128, help="pou: starting precision in bits (default 128)")
    parser.add_argument("--data", default=None, metavar="FILE.json", help="interp: dataset file")
    parser.add_argument("--random", default="3,6,2,2", metavar="N,n,d,m",
                        help="interp: seeded random dataset (default 3,6,2,2)")
    parser.add_argument("--seed", type=int, default=0, help="interp: seed of the dataset and construction")
    parser.add_argument("--attention", default="hardmax", choices=["hardmax", "softmax"], help="interp: attention")
    parser.add_argument("--out", required=True, metavar="FILE.tex", help="write the LaTeX here")
    parser.add_argument("--fragment", action="store_true", help="a fragment for \\input, not a whole document")


def _interp_dataset(args):
    if args.data:
        return load_dataset(args.data)
    try:
        return random_interp_dataset(args.random, args.seed)
    except UsageError as e:
        raise ValueError(str(e)) from None


def run_latex(args) -> int:
    """``symbounds latex``: write the document; returns 0 (bad input raises ValueError, one line)."""
    check_writable(args.out, ValueError)
    if args.what not in ("pou", "interp", "tables", "tighten", "chain"):  # a construction of the catalogue
        from .catalogue_cli import paper_instance

        try:
            paper, values, inst = paper_instance(args.what, args.values, args.example)
        except UsageError as e:
            raise ValueError(str(e)) from None
        text = paper_latex(paper, values, paper.prove(inst), inst, args.fragment)
        atomic_write(args.out, text)
        written(args.out)
        return 0
    if args.values or args.example is not None:
        raise UsageError(f"latex {args.what} takes its flags, not NAME=VALUE parameters or --example")
    if args.what == "tighten":  # the booktabs tables of a tighten sweep: tighten_figures
        from .tighten_figures import run_latex_tighten

        return run_latex_tighten(args)
    if args.what == "pou":
        try:
            inst = instance(args)
        except UsageError as e:
            raise ValueError(str(e)) from None
        if not (0 <= args.points <= 10000):
            raise ValueError(f"--points {args.points}: use between 0 and 10000")
        try:
            precision(args.prec)
        except UsageError as e:
            raise ValueError(str(e)) from None
        text = pou_latex(run(inst, PouOptions(points=args.points, prec=args.prec)), args.fragment)
    elif args.what == "interp":
        text = interp_latex(interp_run(_interp_dataset(args), InterpOptions(attention=args.attention,
                                                                             seed=args.seed)), args.fragment)
    elif args.what == "chain":
        from ..papers.shi_liao.parametric import chain

        text = chain_latex(chain(), args.fragment)
    else:
        text = tables_latex(args.fragment)
    atomic_write(args.out, text)
    written(args.out)
    return 0
