"""[SL26]'s constants in the paper's notation (docs/shi_liao.md, Constants): each formula written in
terms of the constants defined before it, as the paper states them, and the check that they are the
formulas the construction uses (:func:`formulas_agree`).  ``symbounds latex pou`` prints them.
"""

from __future__ import annotations

import sympy

from .constants import M_g_of, M_of, P_paper_of, grid_ratio, r_g_of, symbolic_constants

__all__ = ["NAMES", "ORDER", "notation_formulas", "formulas_agree", "tex_formula", "formulas_latex", "latex_sections"]

_d = sympy.Symbol("d", positive=True, integer=True)
_P = sympy.Symbol("P", positive=True, integer=True)
_k = sympy.Symbol("k", positive=True, integer=True)
_alpha, _C_H, _B, _eps = sympy.symbols("alpha C_H B varepsilon", positive=True)
_M = sympy.Symbol("M", positive=True)
_r_g, _M_g, _c = sympy.symbols("r_g M_g c", positive=True)
_m = sympy.Symbol("m", positive=True, integer=True)
_eta = sympy.Symbol("eta", positive=True)
_S = sympy.Symbol("S(M)", positive=True)
_D = sympy.Symbol("D", positive=True, integer=True)

#: LaTeX names of the constants (keys of :meth:`Constants.table` and ``pou``'s JSON ``constants``).
NAMES = {
    "r_g": "r_g", "m": "m", "P": "P", "P_paper": r"P_{\mathrm{paper}}", "M_g": "M_g", "c": "c", "S": "S(M)",
    "M": "M", "emcM": "e^{-cM}", "eta": r"\eta(M)", "lambda": r"\lambda(M)", "w_ind": r"w_{\mathrm{ind}}",
    "D": "D", "d_ff": r"d_{\mathrm{ff}}", "heads_1": "H^1", "heads_2": "H^2",
    "params_dense": r"\#\text{params (dense)}", "params_nonzero": r"\#\text{params (non-zero)}",
    "max_weight": r"\max|w|", "max_weight_paper_order": r"\varepsilon^{-2d/\alpha}\log(1/\varepsilon)",
}


def notation_formulas() -> dict:
    """Each constant (docs/shi_liao.md, Constants) written in the paper's notation: in terms of the constants defined
    before it (``r_g``, ``m``, ``M_g``, ``c``, ``S(M)``, ``η``), as the paper states them.

    ``formulas_agree`` substitutes the definitions back and compares with
    :func:`symbounds.papers.shi_liao.symbolic_constants`, so the printed formulas are the ones the
    construction uses.
    """
    U = sympy.UnevaluatedExpr
    theta = 2 * sympy.pi * _k / _P
    S = sympy.Sum(sympy.exp(_M * sympy.cos(theta)), (_k, 1, _P))
    return {
        "r_g": r_g_of(_eps, _C_H, _alpha),
        "m": sympy.ceiling(grid_ratio(_d, _r_g)),
        "P": _m**_d,
        "P_paper": P_paper_of(_d, _C_H, _eps, _alpha),
        "M_g": M_g_of(_B, _P, _eps, _r_g),
        "c": 1 - sympy.cos(2 * sympy.pi / _P),
        "S": S,
        "eta": sympy.exp(_M) / _S,
        "lambda": sympy.Sum(sympy.exp(_M * sympy.cos(theta)) * sympy.cos(theta), (_k, 1, _P)) / _S,
        "M": M_of(_P, _B, _d, _M_g, _eps, _c, hold=U),
        "emcM": sympy.exp(-_c * _M),
        "w_ind": 1 / (_eta - 2 * sympy.exp(-_c * _M)),
        "D": _d + 4,
        "d_ff": 2 * _D,
        "heads_1": _P + 2,
        "heads_2": sympy.Integer(1),
    }


def formulas_agree() -> dict:
    """``{name: bool}``: does the notation formula, with ``r_g, m, M_g, c, S, η, D`` replaced by
    their definitions, equal SymPy's ``symbolic_constants()[name]``?  (``P`` is replaced by its
    grid value only in ``P`` itself: elsewhere the paper keeps ``P`` as a symbol.)"""
    full = symbolic_constants()
    nf = notation_formulas()
    sub = {_r_g: full["r_g"], _m: full["m"], _M_g: full["M_g"], _c: full["c"], _S: full["S"], _D: _d + 4}
    sub[_eta] = full["eta"]
    out = {}
    for name, ref in full.items():
        if name not in nf:
            continue
        mine = nf[name].subs(sub).doit() if name != "P" else nf[name].subs(sub)
        out[name] = sympy.simplify((mine - ref.doit())) == 0 or sympy.srepr(mine) == sympy.srepr(ref)
    return out


def tex_formula(expr) -> str:
    """``sympy.latex`` of a constant's formula, with ``w_ind`` as ``w_{\\mathrm{ind}}``."""
    s = sympy.latex(expr)
    return s.replace("w_{ind}", r"w_{\mathrm{ind}}")


#: the constants in the order the paper defines them
ORDER = ("r_g", "m", "P", "P_paper", "M_g", "c", "S", "M", "emcM", "eta", "lambda", "w_ind", "D", "d_ff",
         "heads_1", "heads_2")


def formulas_latex() -> str:
    """An ``align*`` of every constant's formula in the paper's notation (no values; ``symbounds
    latex pou`` adds the values at an instance)."""
    nf = notation_formulas()
    rows = [rf"{NAMES[name]} &= {tex_formula(nf[name])}" for name in ORDER if name in nf]
    return "\\begin{align*}\n" + " \\\\\n".join(rows) + "\n\\end{align*}"


def latex_sections(inst, proof) -> list:
    """The ``Paper.latex`` hook of [SL26]: the constants in the paper's notation."""
    return [("Constants in the paper's notation", formulas_latex())]
