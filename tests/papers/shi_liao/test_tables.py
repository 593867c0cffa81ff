"""The recorded tables against a recomputation (ablation, slopes) and the LaTeX rendering."""

import pytest

from symbounds.papers.shi_liao import ablation as ab
from symbounds.papers.shi_liao import tables as tb


@pytest.mark.parametrize("row", tb.ABLATION)
def test_ablation_rows_recompute(row):
    name, d, amb, eps, C_H, P_net, par_net, P_net_paper, P_cube, par_cube, P_cube_paper = row
    r = ab.ablation_row(name, eps, C_H, 1, amb)
    assert (r["d"], r["P_manifold"], r["params_manifold"], r["P_cube"], r["params_cube"]) == \
        (d, P_net, par_net, P_cube, par_cube)
    assert abs(r["P_manifold_paper"] / P_net_paper - 1) < 1e-3
    assert abs(r["P_cube_paper"] / P_cube_paper - 1) < 1e-3
    # the independent count: params = 8D(P+2) + 4D + 2(4D^2 + 3D), D = ambient + 4
    D = amb + 4
    assert par_net == 8 * D * (P_net + 2) + 4 * D + 2 * (4 * D * D + 3 * D)


@pytest.mark.parametrize("row", tb.SLOPES)
def test_slopes_recompute_and_approach_d_over_alpha(row):
    name, d, amb, alpha, s_net, d_a, s_cube, D_a = row
    C_H = {"circle": "1", "sphere": "1/2", "torus": "1/2", "curve": "13/14"}[name]
    sw = ab.sweep(name, C_H, alpha, amb, ks=range(4, 13))
    eps = [e for e, _, _ in sw]
    got_net = ab.slope(eps, [p for _, p, _ in sw])
    got_cube = ab.slope(eps, [p for _, _, p in sw])
    assert abs(got_net - s_net) < 1e-4 and abs(got_cube - s_cube) < 1e-4
    from fractions import Fraction

    assert abs(got_net - float(Fraction(d_a))) < 0.01  # intrinsic d/alpha ...
    assert abs(got_cube - float(Fraction(D_a))) < 0.01  # ... against the ambient D/alpha


def test_latex():
    tex = tb.to_latex(tb.COMPARISON, tb.COMPARISON_COLUMNS)
    assert tex.count(r"\\") == len(tb.COMPARISON) + 1
    assert "[SL26] & softmax & sinusoidal & 2 &" in tex
    assert r"O(eps\^{}\{-d/alpha\})" not in tex and r"eps\^{}{-d/alpha}" in tex
    assert len(tb.COMPARISON) == 6
    tex = tb.to_latex(tb.ABLATION, tb.ABLATION_COLUMNS)
    assert "curve & 1 & 10 & 1/10" in tex
