"""LaTeX of numbers, text and claims, shared by the command line and each construction's own
sections (``Paper.latex``; the ``pou``, ``interp`` and ``tables`` documents of the built-in papers).

Numbers.  A certified side printed as ``[m ± r]`` is an Arb ball re-rounded with
:meth:`flint.arb.str`, which widens the radius so the printed ball still contains the value;
constants are printed as exact rationals when rational, else as decimals rounded to a given
number of significant digits.
"""

from __future__ import annotations

import re
from fractions import Fraction

import flint

from .claims import RELATION_TEX
from .exact import as_fraction, decimal

__all__ = ["decimal_tex", "ball_tex", "text_tex", "caption_text", "value_tex", "tol_tex", "tol_definition",
           "claim_block", "cell", "sci_tex", "column_cells", "columns", "booktabs"]

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


def claim_block(c) -> str:
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
# tables

def cell(v) -> str:
    """A table cell: an exact fraction as ``\\tfrac``, a float to 4 significant digits, else text."""
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
    any entry has, at most 4); anything else (names, exact fractions) as :func:`cell`."""
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) != len(values):
        return [cell(v) for v in values]
    if max(abs(v) for v in nums) >= 1e6:
        return [f"${sci_tex(v)}$" for v in nums]
    if all(isinstance(v, int) for v in nums):
        return [str(v) for v in nums]
    places = min(4, max(len(repr(float(v)).partition(".")[2].rstrip("0")) for v in nums))
    return [f"{float(v):.{places}f}" for v in nums]


def columns(rows) -> list:
    """``rows`` (tuples) with each column formatted by :func:`column_cells`."""
    cols = [column_cells([r[i] for r in rows]) for i in range(len(rows[0]))]
    return [[col[j] for col in cols] for j in range(len(rows))]


def booktabs(columns, head, rows, align=None) -> list:
    """A ``booktabs`` tabular: ``head``, then each row (a dict read at ``columns``, or a sequence)."""
    align = align or "l" * len(columns)
    out = [r"\begin{tabular}{" + align + "}", r"\toprule", " & ".join(head) + r" \\", r"\midrule"]
    for r in rows:
        vals = [r[c] for c in columns] if isinstance(r, dict) else list(r)
        out.append(" & ".join(vals) + r" \\")
    return out + [r"\bottomrule", r"\end{tabular}"]
