#!/usr/bin/env python3
"""How far one Winograd tile F(m×m, 3×3) computed in float32 lands from the exact correlation.

The transforms are built by the Toom-Cook construction from their interpolation points (and
the point at infinity), in exact fractions, then applied in float32 as nnlab's CPU kernels do:
U = G g Gᵀ, V = Bᵀ d B, Y = Aᵀ (U ⊙ V) A. The error is the largest difference from the
float64 direct sum over the tile, relative to the tile's largest output, over random tiles
(inputs N(0, 1), filters N(0, 0.2²)). One input channel, so the channels' sum, which averages
errors out a little, is left out. Used to decide which tiles nnlab may take
(docs/benchmarks.md, "CIFAR-10, real data, against PyTorch").

    /usr/bin/python3 scripts/winograd_error.py [--trials N]
"""
import argparse
from fractions import Fraction

import numpy as np


def poly_mul(a, b):
    out = [Fraction(0)] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            out[i + j] += x * y
    return out


def transforms(m, r, points):
    """Aᵀ (m × n), G (n × r), Bᵀ (n × n) for F(m, r) from n − 1 finite points and infinity."""
    n = m + r - 1
    pts = [Fraction(p) for p in points]
    if len(pts) != n - 1 or len(set(pts)) != len(pts):
        raise SystemExit(f"F({m}, {r}) needs {n - 1} distinct finite points, got {points}")
    # Aᵀ evaluates the output polynomial's coefficients at the points; infinity gives the top one.
    at = [[p ** j for p in pts] + [Fraction(int(j == m - 1))] for j in range(m)]
    # G: the filter's values at the points, divided by the Lagrange denominators.
    g = []
    for i, p in enumerate(pts):
        denominator = Fraction(1)
        for k, q in enumerate(pts):
            if k != i:
                denominator *= p - q
        g.append([p ** j / denominator for j in range(r)])
    g.append([Fraction(0)] * (r - 1) + [Fraction(1)])
    # Bᵀ: the coefficients of ∏_{k≠i} (x − p_k), and of ∏_k (x − p_k) for infinity.
    bt = []
    for i in range(len(pts) + 1):
        poly = [Fraction(1)]
        for k, q in enumerate(pts):
            if k != i:
                poly = poly_mul(poly, [-q, Fraction(1)])
        bt.append(poly + [Fraction(0)] * (n - len(poly)))
    return tuple(np.array(x, dtype=np.float64) for x in (at, g, bt))


def tile_error(m, points, trials, seed):
    r = 3
    n = m + r - 1
    at, g_t, bt = transforms(m, r, points)
    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(trials):
        d = rng.standard_normal((n, n))
        g = rng.standard_normal((r, r)) * 0.2
        exact = np.array([[np.sum(d[i:i + r, j:j + r] * g) for j in range(m)] for i in range(m)])
        f = np.float32
        u = g_t.astype(f) @ g.astype(f) @ g_t.T.astype(f)
        v = bt.astype(f) @ d.astype(f) @ bt.T.astype(f)
        y = at.astype(f) @ (u * v) @ at.T.astype(f)
        errors.append(np.max(np.abs(y - exact)) / np.max(np.abs(exact)))
        # The construction itself, in float64, must be exact to rounding.
        y64 = at @ ((g_t @ g @ g_t.T) * (bt @ d @ bt.T)) @ at.T
        assert np.max(np.abs(y64 - exact)) < 1e-9 * np.max(np.abs(exact)), "wrong transforms"
    return float(np.median(errors)), float(np.max(errors))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.trials < 1:
        raise SystemExit("--trials must be at least 1")
    cases = [
        (2, [0, 1, -1]),
        (4, [0, 1, -1, 2, -2]),
        (6, [0, 1, -1, 2, -2, 0.5, -0.5]),
        (8, [0, 1, -1, 2, -2, 0.5, -0.5, 1.5, -1.5]),
        (8, [0, 1, -1, 2, -2, 0.5, -0.5, 4, -4]),
        (8, [0, 1, -1, 2, -2, 0.5, -0.5, 0.25, -0.25]),
    ]
    print(f"float32 error of one F(m×m, 3×3) tile, relative to its largest output, {args.trials} random tiles")
    print("| tile | points (and infinity) | median | largest |")
    print("|---|---|---|---|")
    for m, points in cases:
        median, largest = tile_error(m, points, args.trials, args.seed)
        shown = ", ".join(str(Fraction(p)) for p in points)
        print(f"| F({m}×{m}) | {shown} | {median:.1e} | {largest:.1e} |")


if __name__ == "__main__":
    main()
