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

Coordinates are exact (``Fraction``); ``as_floats`` turns them into float pairs for plotting.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["STAGES", "stage_clouds", "as_floats", "figure_stages"]

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


def figure_stages(con, clouds: dict | None = None):
    """A matplotlib Figure with one panel per stage (like [AFZ25]'s Figure 5), one colour per
    sequence, targets drawn as black stars in the first and last panels.  Each panel has its own
    axes (the middle stages live in the integer frame, far from the unit box)."""
    import matplotlib.pyplot as plt

    clouds = clouds or stage_clouds(con)
    fig, axes = plt.subplots(1, len(STAGES), figsize=(3.2 * len(STAGES), 3.2))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes, STAGES):
        for j, seq in enumerate(clouds[name]):
            xs, ys = as_floats(seq)
            ax.plot(xs, ys, "o", ms=4, color=colours[j % len(colours)], label=f"X^{j + 1}")
        if name in ("input", "final"):
            for Y in con.dataset.targets:
                xs, ys = as_floats(Y)
                ax.plot(xs, ys, "*", ms=10, mfc="none", color="black")
        ax.set_title(name)
        ax.ticklabel_format(style="sci", scilimits=(-3, 4))
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig
