"""The LaTeX documents of ``symbounds latex pou|interp|tables|chain|KEY``: the document frame and
the claim list; the bodies are the constructions' own.

The documents, each standalone (``article`` with ``amsmath``, ``booktabs``, ``graphicx``,
``lmodern``) or a fragment for ``\\input`` (``fragment=True``) whose first lines name the packages it
needs (:data:`PACKAGES`); a fragment fits the text width of a plain ``article``.  Each claim is
shown once, as its declared display in the paper's notation, with the words of its plain
statement that the display does not say as a short caption
(:func:`symbounds.core.tex.caption_text`).

``pou``
    Shi & Liao [SL26] at one instance: every constant as its formula in the paper's notation and
    its value, then the lemma chain, the ε budget and the assumptions with their verdicts
    (:func:`symbounds.papers.shi_liao.latex.pou_body`, from one
    :func:`symbounds.papers.shi_liao.run.run`).
``interp``
    Alcalde, Fantuzzi & Zuazua [AFZ25] on one dataset: sizes against the paper's block formulas,
    the stage claims and the regularised-training bounds
    (:func:`symbounds.papers.alcalde.latex.interp_body`).
``tables``
    [SL26]'s comparison table and the manifold-versus-cube ablation
    (:func:`symbounds.papers.shi_liao.latex.tables_body`).
``KEY``
    Any construction of the catalogue at one instance (``NAME=VALUE ...`` or ``--example K``):
    its citation, the instance, the construction's own sections (its ``Paper.latex`` hook) and
    every claim with its verdict (:func:`paper_latex`).

Numbers, text and claims are set by :mod:`symbounds.core.tex` (re-exported here): a certified
side printed as ``[m ± r]`` is an Arb ball re-rounded with :meth:`flint.arb.str`, which widens
the radius so the printed ball still contains the value.
"""

from __future__ import annotations

from ..core.files import atomic_write, check_writable
from ..core.tex import (  # noqa: F401  (the formatting helpers, by their old names too)
    ball_tex,
    caption_text,
    claim_block,
    column_cells,
    decimal_tex,
    sci_tex,
    text_tex,
    tol_definition,
    tol_tex,
    value_tex,
)
from ..papers.alcalde.dataset import load_dataset
from ..papers.alcalde.latex import INTERP_TITLE, interp_body
from ..papers.alcalde.run import InterpOptions
from ..papers.alcalde.run import run as interp_run
from ..papers.shi_liao.latex import POU_TITLE, TABLES_TITLE, order_tex, pou_body, remark_tex, tables_body  # noqa: F401
from ..papers.shi_liao.notation import formulas_agree, notation_formulas  # noqa: F401
from ..papers.shi_liao.run import PouOptions, run
from .args import UsageError, add_instance_args, instance, precision, random_interp_dataset, written

__all__ = [
    "pou_latex", "interp_latex", "tables_latex", "notation_formulas", "formulas_agree", "ball_tex", "decimal_tex",
    "document", "add_latex_arguments", "run_latex", "value_tex", "paper_latex",
]


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
    return document(pou_body(res), fragment, title=POU_TITLE, what="pou")


def interp_latex(res, fragment: bool = False) -> str:
    """Sizes, block counts against the paper's formulas and the stage claims of one
    :class:`symbounds.papers.alcalde.run.InterpResult`."""
    return document(interp_body(res), fragment, title=INTERP_TITLE, what="interp")


def tables_latex(fragment: bool = False) -> str:
    """[SL26]'s comparison table and the ablation, booktabs."""
    return document(tables_body(), fragment, title=TABLES_TITLE, what="tables")


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
    out += [claim_block(c) for c in proof.results]
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
