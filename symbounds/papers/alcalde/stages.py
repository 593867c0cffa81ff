"""The point clouds of exact sequence interpolation [AFZ25], stage by stage (for pictures).

``stage_clouds(construction)`` evaluates the built hardmax model exactly (the public
:func:`symbounds.papers.alcalde.evaluate_sets`, at the layer indices of ``construction.stages``) and
returns, for each stage (docs/alcalde.md, The four stages), every sequence's distinct tokens:

=================  ======================================================================
stage              the state
=================  ======================================================================
``input``          the dataset's input sequences ``X^j``
``separation``     after the ``K`` separation blocks (sequences share no needed point)
``leaders``        after leader selection: each sequence's leader beyond the box, its other
                   chosen points on a sphere in the negative orthant (integer frame
                   ``z = D x + t``, see ``Construction.scale`` / ``shift``)
``collapse``       after the hardmax collapse ``A = I``: each sequence is its ``m_j`` points
``final``          the output: each sequence's set equals its target set ``Y^j``
=================  ======================================================================

Coordinates are exact (``Fraction``); ``as_floats`` turns them into float pairs for plotting
(the figure is :func:`symbounds.app.plot.plot_stages`).
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["STAGES", "stage_clouds", "as_floats"]

STAGES = ("input", "separation", "leaders", "collapse", "final")


def stage_clouds(con) -> dict:
    """``{stage: [sorted list of distinct points (tuples of Fractions) of sequence j, ...]}``."""
    from . import evaluate_sets

    ds = con.dataset
    idx = {name: con.stages[name] for name in STAGES[1:]}
    final, snaps = evaluate_sets(con.model, ds, tuple(sorted(set(idx.values()))))
    pts = lambda sets: [sorted(tuple(Fraction(v) for v in p) for p in s) for s in sets]
    out = {"input": [sorted({tuple(Fraction(v) for v in x) for x in X}) for X in ds.inputs]}
    for name in STAGES[1:]:
        out[name] = pts(final) if name == "final" else pts(snaps[idx[name]])
    return out


def as_floats(points, dims=(0, 1)) -> tuple[list, list]:
    """``(xs, ys)``: two coordinates of exact points as floats (for plotting only)."""
    return [float(p[dims[0]]) for p in points], [float(p[dims[1]]) for p in points]
