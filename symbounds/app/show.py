"""Showing results in the notebooks: as math and tables in a Jupyter kernel, as text in a script.

``show_math(latex, text)`` displays a formula with ``IPython.display.Math`` in a kernel (the
notebook renders it) and prints ``text`` otherwise; ``show(obj)`` hands an object to IPython's
``display`` (which uses its ``_repr_latex_`` / ``_repr_html_``) or prints its short repr;
``Claims(results)`` is a list of claim results with a table display.
"""

from __future__ import annotations

__all__ = ["in_kernel", "show", "show_math", "Claims"]


def in_kernel() -> bool:
    """Is this code running in an IPython kernel or shell (where rich displays render)?"""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    return get_ipython() is not None


def show_math(latex: str, text: str | None = None) -> None:
    """The formula ``latex`` (math mode, no dollars) as math in a kernel, else ``text`` (or ``latex``)."""
    if in_kernel():
        from IPython.display import Math, display

        display(Math(latex))
    else:
        print(latex if text is None else text)


def show(obj) -> None:
    """``obj`` with its rich display in a kernel, else its (short) repr."""
    if in_kernel():
        from IPython.display import display

        display(obj)
    else:
        print(repr(obj))


class Claims(list):
    """Claim results shown as one table (HTML in a notebook, LaTeX for math renderers, text lines
    as a repr)."""

    def _repr_html_(self) -> str:
        from ..core.display import claims_html

        return claims_html(self)

    def _repr_latex_(self) -> str:
        from ..core.display import claims_latex

        return claims_latex(self)

    def __repr__(self) -> str:
        lines = []
        for r in self:
            where = r.context if r.prec is None else f"{r.context} @ {r.prec} bits"
            lines.append(f"{r.id:5} {str(r.verdict):9} {where:16} {r.statement}")
        return "\n".join(lines)
