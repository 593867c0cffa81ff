"""LaTeX of the class theorem (``symbounds latex class``): [SL26]'s bound for every target of the
Hölder class at one instance, with the certified two-sided value of the worst error.

The numbers come from a class certificate (``--certificate CERT.json``, re-checked first) or from
a fresh :func:`symbounds.papers.shi_liao.class_certificate.certify_class` of the instance flags.
The statement and its proof sketch follow docs/shi_liao.md, "Every target of the class".
"""

from __future__ import annotations

from fractions import Fraction

import sympy

from ..core.exact import decimal_down, decimal_up
from ..papers.shi_liao.class_certificate import check_class_certificate
from ..papers.shi_liao.constants import Instance, constants

__all__ = ["class_latex"]


def _q(text) -> str:
    return sympy.latex(sympy.Rational(str(text)))


def _x_tex(xs) -> str:
    parts = [rf"\tfrac{{{Fraction(v).numerator}}}{{{Fraction(v).denominator}}}" if Fraction(v).denominator != 1
             else str(Fraction(v)) for v in xs]
    return parts[0] if len(parts) == 1 else r"\bigl(" + ", ".join(parts) + r"\bigr)"


def _num(v, digits=6) -> str:
    """A positive real as LaTeX with ``digits`` significant digits."""
    s = f"{float(v):.{digits}g}"
    if "e" in s:
        m, e = s.split("e")
        return rf"{m}\cdot 10^{{{int(e)}}}"
    return s


def _tightened_tex(results: list) -> str:
    """A paragraph of the class minima of a ``tighten --class --json`` report (its re-check commands
    named; the values are the report's)."""
    rows = []
    for r in results:
        if r.get("criterion") != "class" or r.get("minimum") is None:
            continue
        name = {"Mg": "M_g", "M": "M", "grid": "m"}.get(r["constant"], r["constant"])
        text = rf"${name} = {_num(float(Fraction(r['minimum'])), 8)}$ (derived ${_num(float(Fraction(r['paper'])))}$"
        if r.get("slack"):
            text += rf", slack ${_num(float(Fraction(r['slack'])), 4)}$"
        text += ")"
        if r.get("below_status") == "fail":
            text += rf"; at ${_num(float(Fraction(r['below'])), 8)}$ the worst target is refuted"
        rows.append(text)
    if not rows:
        return ""
    return (r"\medskip\noindent\textbf{Tightened constants} (\texttt{symbounds tighten --class}, each other constant "
            r"derived): the class bound still holds with " + "; ".join(rows) + ".")


def class_latex(cert: dict, fragment: bool = False, checked: bool = False, tightened: list | None = None) -> str:
    """The theorem, the certificate behind it, and a proof sketch, from a class certificate
    (checked here unless ``checked``); ``tightened``: the results of a ``tighten --class --json``
    report, typeset as the class minima of the constants."""
    from .latex import document

    if not checked:
        check_class_certificate(cert)
    ij, cj, w = cert["instance"], cert["class"], cert["worst"]
    d = ij["d"]
    num = lambda v: None if v is None else Fraction(v)
    inst = Instance(d=d, alpha=cj["alpha"], C_H=cj["holder"], B=cj["bound"], eps=ij["eps"], target="0",
                    M=num(ij["M"]), M_g=num(ij["Mg"]))
    K = constants(inst)
    upper, lower = Fraction(cert["max_bound"]), Fraction(w["lower"])
    norm = r"\lvert y - x^*\rvert" if d == 1 else r"\lVert y - x^*\rVert"
    normx = r"\lvert x - y\rvert" if d == 1 else r"\lVert x - y\rVert"
    alpha = sympy.Rational(cj["alpha"])
    pw = "" if alpha == 1 else f"^{{{sympy.latex(alpha)}}}"
    scales = []
    for name, sym, given in (("M_g", "M_g", ij["Mg"]), ("M", "M", ij["M"])):
        val = K.value(sym).mid()
        scales.append(rf"${name} = {_q(given)}$ (given)" if given is not None else rf"${name} \approx {_num(val)}$")
    body = [
        r"\subsection*{The class bound at an instance}",
        rf"Instance: $d = {d}$, $\alpha = {_q(cj['alpha'])}$, $C_H = {_q(cj['holder'])}$, $B = {_q(cj['bound'])}$, "
        rf"$\varepsilon = {_q(ij['eps'])}$; $P = {K.P}$ tokens, " + ", ".join(scales) + ".",
        "",
        r"\medskip\noindent\textbf{Theorem.} \itshape For every $g\colon [0,1]^{" + str(d) + r"} \to \mathbb R$ with "
        rf"$\lvert g\rvert \le B$ and $\lvert g(x) - g(y)\rvert \le C_H {normx}{pw}$, the two-block softmax "
        r"Transformer $T_g$ of [SL26] built for $g$ at this instance satisfies",
        r"\[",
        rf"\sup_{{x \in [0,1]^{{{d}}}}} \lvert T_g(x) - g(x)\rvert \;\le\; {decimal_up(upper, 7)} \;\le\; "
        rf"\varepsilon = {_q(ij['eps'])} .",
        r"\]",
        rf"The bound is attained up to $2B\max_k \ell_k$: the target $g_0(y) = \min\bigl(C_H {norm}{pw},\, 2B\bigr) - B$ "
        rf"of the class, with $x^* = {_x_tex(w['x'])}$, has $\lvert T_{{g_0}}(x^*) - g_0(x^*)\rvert \ge "
        rf"{decimal_down(lower, 7)}$. \upshape",
        "",
        r"\medskip\noindent\textbf{Certificate.} "
        rf"{len(cert['boxes'])} boxes covering the cube, each with a certified upper bound of $E$ (below), "
        rf"evaluated in Arb ball arithmetic at {cert['prec']} bits on the network's weights written at "
        rf"{cert['model_prec']} bits (SHA-256 \texttt{{{cert['model_sha256'][:16]}}}\dots); re-checked with "
        r"\texttt{symbounds check}.",
        "",
        r"\medskip\noindent\textit{Proof sketch.} Every weight of $T_g$ but the $P$ layer-1 values $g(c_h)$ is the "
        r"same for every $g$. With $\tilde\beta(x)$ the layer-2 softmax weights at column 1 (independent of $g$), "
        r"$T_g(x) = \sum_k \tilde\beta_k(x)\,\tilde g_k$ and $\tilde g_k = g(c_k) + \delta_k$, "
        r"$\lvert\delta_k\rvert \le B\ell_k$, where $\ell_k = \lvert\Lambda_g\pi^{(k)}_{k1} - 1\rvert + "
        r"\sum_{h\ne k}\Lambda_g\pi^{(h)}_{k1}$ depends on the layer-1 weights only. Since "
        r"$\lvert g(c_k) - g(x)\rvert \le \min(C_H\lVert x - c_k\rVert^\alpha, 2B)$,",
        r"\[",
        r"\lvert T_g(x) - g(x)\rvert \le E(x) := \sum_k \tilde\beta_k(x)\Bigl[\min\bigl(C_H\lVert x - c_k\rVert^\alpha,"
        r" 2B\bigr) + B\ell_k\Bigr],",
        r"\]",
        r"and the certificate proves $\sup_x E(x) \le$ the bound above. The target $g_0$ lies in the class "
        r"($t\mapsto t^\alpha$ is subadditive), and $T_{g_0}(x^*) - g_0(x^*) = \sum_k\tilde\beta_k(x^*)"
        r"(a_k + \delta_k) \ge E(x^*) - 2B\sum_k\tilde\beta_k(x^*)\ell_k$ with "
        r"$a_k = \min(C_H\lVert c_k - x^*\rVert^\alpha, 2B)$; the right side is certified at $x^*$. $\square$",
        "",
        rf"\medskip\noindent At $x^*$: $E(x^*) \in {_ball(w['E'])}$, leakage $2B\sum_k\tilde\beta_k\ell_k \in "
        rf"{_ball(w['leakage'])}$. The worst error over the class is "
        rf"${decimal_down(lower, 7)} \le \sup_g \sup_x\lvert T_g - g\rvert \le {decimal_up(upper, 7)}$, "
        rf"{_share(upper, Fraction(ij['eps']))}.",
    ]
    if tightened:
        body += ["", _tightened_tex(tightened)]
    return document("\n".join(body), fragment, what="class")


def _ball(text: str) -> str:
    from .latex import ball_tex

    return ball_tex(text)


def _share(upper: Fraction, eps: Fraction) -> str:
    return rf"about ${float(upper / eps):.3g}\,\varepsilon$"


def run_latex_class(args) -> int:
    """``symbounds latex class [instance flags | --certificate CERT.json] --out FILE.tex``."""
    from ..core.certificate import CertificateError
    from ..core.files import atomic_write
    from ..papers.shi_liao.class_bound import ClassOptions
    from ..papers.shi_liao.class_certificate import certify_class
    from .args import UsageError, instance, written
    from .class_cli import is_class_certificate

    import os

    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        raise ValueError(f"{args.out}: folder {folder} does not exist")
    tightened = None
    if getattr(args, "table", None):
        from ..core.files import read_json_file

        rep = read_json_file(args.table, ValueError)
        if not isinstance(rep, dict) or rep.get("command") != "tighten" or not isinstance(rep.get("results"), list):
            raise ValueError(f"{args.table}: not a symbounds tighten --json report")
        tightened = [r for r in rep["results"] if isinstance(r, dict)]
    if args.certificate:
        cert = is_class_certificate(args.certificate)
        if cert is None:
            raise ValueError(f"{args.certificate}: not a class certificate (symbounds certify --holder-class --out)")
        try:
            text = class_latex(cert, args.fragment, tightened=tightened)
        except CertificateError as e:
            raise ValueError(f"{args.certificate}: certificate rejected: {e}") from None
    else:
        if args.target is not None:
            raise ValueError("latex class: the class has no --target")
        try:
            inst = instance(args)
        except UsageError as e:
            raise ValueError(str(e)) from None
        cert, res = certify_class(inst, ClassOptions())
        if res.verdict != "proved":
            raise ValueError(f"latex class: the class bound is {res.verdict} at this instance, no theorem to state")
        text = class_latex(cert, args.fragment, checked=True, tightened=tightened)
    atomic_write(args.out, text)
    written(args.out)
    return 0
