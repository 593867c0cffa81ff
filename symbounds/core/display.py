"""How results show in a notebook: short reprs and rich displays (``_repr_latex_``, ``_repr_html_``).

A repr names what an object is and its few numbers that matter, in at most :data:`MAX_REPR`
characters (a ``Transformer`` or a ``pou`` result printed whole ran to 15,000-20,000 characters).
Exact numbers are shown as outward-rounded decimals (``[-3.14184497429, 6.33050684500]`` for an
enclosure, never a 40-digit ``Fraction``); formulas go through SymPy's LaTeX printer; claims are a
table with their verdicts.  Each rich display is plain LaTeX (``amsmath``) that both MathJax and
``pdflatex`` read.
"""

from __future__ import annotations

import html
import re
from fractions import Fraction

__all__ = ["MAX_REPR", "short", "enclosure_text", "claims_html", "claims_latex", "verdict_counts",
           "tex_text", "html_table", "Markup", "bold"]

#: the longest repr of a result object
MAX_REPR = 300

#: significant digits of the numbers in a repr
REPR_DIGITS = 12

_VERDICT_COLOUR = {"proved": "#1a7f37", "refuted": "#cf222e", "undecided": "#9a6700", "evidence": "#57606a",
                   "against": "#cf222e"}


def short(text: str, limit: int = MAX_REPR) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with ``...`` before its closing bracket."""
    if len(text) <= limit:
        return text
    close = text[-1] if text[-1] in ")]}>" else ""
    return text[: limit - 3 - len(close)] + "..." + close


def enclosure_text(lo: Fraction, hi: Fraction, digits: int = REPR_DIGITS) -> str:
    """``[lo, hi]`` as decimals rounded outward (the lower end down, the upper end up)."""
    from .exact import decimal_down, decimal_up

    return f"[{decimal_down(Fraction(lo), digits)}, {decimal_up(Fraction(hi), digits)}]"


def verdict_counts(results) -> str:
    """``"21 of 23 proved, 2 evidence"`` of a list of ClaimResults."""
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.verdict)] = counts.get(str(r.verdict), 0) + 1
    proved = counts.pop("proved", 0)
    rest = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    return f"{proved} of {len(results)} proved" + (f", {rest}" if rest else "")


def tex_text(text: str) -> str:
    """Plain text for ``\\text{...}`` in LaTeX: special characters escaped, anything outside ASCII
    (which pdflatex's default fonts may lack) replaced by ``?``."""
    out = []
    for ch in str(text):
        if ch in "\\":
            out.append(r"\textbackslash{}")
        elif ch in "&%$#_{}":
            out.append("\\" + ch)
        elif ch == "~":
            out.append(r"\textasciitilde{}")
        elif ch == "^":
            out.append(r"\textasciicircum{}")
        elif ord(ch) < 128:
            out.append(ch)
        else:
            out.append("?")
    return "".join(out)


def _who(r) -> str:
    """What decided a claim: ``ball, 128 bits``, ``exact``, ``sympy``."""
    return f"{r.context}, {r.prec} bits" if r.prec else str(r.context)


def claims_latex(results, title: str | None = None) -> str:
    """The claims as a LaTeX table in math mode (an ``array``): id, the claim in the paper's notation
    (its declared formula, else its statement as text), verdict, what decided it."""
    rows = []
    for r in results:
        formula = r.claim.tex if getattr(r, "claim", None) is not None and r.claim.tex else \
            rf"\text{{{tex_text(r.statement)}}}"
        rows.append(rf"\text{{{tex_text(r.id)}}} & {formula} & \text{{{tex_text(r.verdict)}}} & "
                    rf"\text{{{tex_text(_who(r))}}}")
    table = (r"\begin{array}{llll}\text{claim} & & \text{verdict} & \text{decided by} \\ \hline "
             + r" \\ ".join(rows) + r"\end{array}")
    if title:  # a nested array, not \multicolumn (which MathJax lacks)
        table = rf"\begin{{array}}{{l}}\text{{{tex_text(title)}}} \\ {table}\end{{array}}"
    return f"$${table}$$"


class Markup(str):
    """HTML that :func:`html_table` puts into a cell as it is (made only by :func:`bold` here)."""


def bold(text, colour: str | None = None) -> Markup:
    """``text`` escaped and set in bold (optionally coloured), as a :class:`Markup` cell."""
    style = f" style='color:{html.escape(colour, quote=True)}'" if colour else ""
    return Markup(f"<b{style}>{html.escape(str(text))}</b>")


def _html_cell(c) -> str:
    return c if isinstance(c, Markup) else html.escape(str(c))


def html_table(header: list[str], rows: list[list[str]], caption: str | None = None) -> str:
    """A small HTML table; every header, caption and body cell is escaped here, except the body
    cells that are :class:`Markup` (pass plain text, or :func:`bold` for an emphasised cell)."""
    cap = f"<caption style='text-align:left'>{html.escape(caption)}</caption>" if caption else ""
    head = "".join(f"<th style='text-align:left'>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left'>{_html_cell(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(text, limit: int = 60) -> str:
    return short(str(text), limit)


def claims_html(results, caption: str | None = None) -> str:
    """The claims as an HTML table: id, statement, verdict (coloured), what decided it, the two sides."""
    rows = []
    for r in results:
        colour = _VERDICT_COLOUR.get(str(r.verdict), "black")
        rows.append([_cell(r.id), _cell(r.statement, 90),
                     bold(r.verdict, colour), _cell(_who(r)),
                     _cell(r.lhs, 40), _cell(r.rhs, 40)])
    return html_table(["claim", "statement", "verdict", "decided by", "lhs", "rhs"], rows, caption)


def single_line(text: str) -> str:
    """``text`` with its whitespace runs (newlines included) made single spaces."""
    return re.sub(r"\s+", " ", str(text)).strip()
