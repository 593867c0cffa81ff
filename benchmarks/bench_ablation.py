"""The [SL26] ablation (docs/shi_liao.md, "Manifolds"): a net of the manifold against a grid of the ambient cube.

    python benchmarks/bench_ablation.py

Table 1: for the same target (C_H, alpha) and eps, the token count P and the dense parameter count
of the network when the centres cover the manifold (the certified net of
symbounds/papers/manifolds.py) or the ambient cube [0,1]^D (the grid of docs/shi_liao.md, "Constants"), with the
paper's orders.  Table 2: the least-squares slope of log P against log(1/eps) over
eps = 2^-4 .. 2^-12, which must approach d/alpha for the net and D/alpha for the cube.
"""

import time

from symbounds.papers.shi_liao import ablation as ab

ROWS = [
    # manifold, ambient, eps, C_H (the default target's geodesic constant), alpha
    ("circle", 2, "1/2", "1", "1"),
    ("circle", 10, "1/2", "1", "1"),
    ("sphere", 3, "9/10", "1/2", "1"),
    ("torus", 4, "9/10", "1/2", "1"),
    ("curve", 10, "1/2", "13/14", "1"),
    ("curve", 10, "1/10", "13/14", "1"),
    ("curve", 16, "1/10", "13/14", "1"),
]

SWEEPS = [("circle", 2, "1", "1"), ("circle", 2, "1", "1/2"), ("sphere", 3, "1/2", "1"), ("torus", 4, "1/2", "1"),
          ("curve", 10, "13/14", "1"), ("curve", 10, "13/14", "1/2")]


def main():
    t0 = time.perf_counter()
    print("| manifold | d | D | eps | C_H | P (net) | params (net) | P paper C_M(16C_H)^(d/a)eps^(-d/a) | "
          "P (cube grid) | params (cube) | P paper D^(D/2)(8C_H)^(D/a)eps^(-D/a) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, amb, eps, C_H, alpha in ROWS:
        r = ab.ablation_row(name, eps, C_H, alpha, amb)
        print(f"| {name} | {r['d']} | {r['ambient']} | {eps} | {C_H} | {r['P_manifold']} | {r['params_manifold']} | "
              f"{r['P_manifold_paper']:.4g} | {r['P_cube']:.4g} | {r['params_cube']:.4g} | {r['P_cube_paper']:.4g} |")
    print()
    print("| manifold | d | D | alpha | slope log P_net / log(1/eps) | d/alpha | slope log P_cube | D/alpha | "
          "P_net at eps = 2^-12 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, amb, C_H, alpha in SWEEPS:
        sw = ab.sweep(name, C_H, alpha, amb, ks=range(4, 13))
        eps = [e for e, _, _ in sw]
        s_net = ab.slope(eps, [p for _, p, _ in sw])
        s_cube = ab.slope(eps, [p for _, _, p in sw])
        from fractions import Fraction
        d = {"circle": 1, "curve": 1, "sphere": 2, "torus": 2}[name]
        print(f"| {name} | {d} | {amb} | {alpha} | {s_net:.4f} | {Fraction(d) / Fraction(alpha)} | {s_cube:.4f} | "
              f"{Fraction(amb) / Fraction(alpha)} | {sw[-1][1]} |")
    print(f"# {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
