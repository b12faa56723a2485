"""The ALS's small ridge solves: ``solve_psd`` against LAPACK on the C-ordered matrix.

The systems the ALS assembles are C-ordered NumPy arrays. ``dposv`` wants
Fortran order, so handing it the array makes f2py copy it transposed;
``mics._linalg.solve_psd`` hands it the transposed view instead (a Fortran
array whose lower triangle is the matrix's upper one, the triangle read
either way). Prints, per size, the median time of both routes on one BLAS
thread (as inside the fits) and their ratio, measured in the same run, and
the largest difference of their solutions relative to its size (rounding:
the two routes factor the same triangle in a different loop order).

Run: ``python benchmarks/bench_solve.py [--sizes 60 100 300] [--repeats 300]``.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
from bench_kernels import median_time
from scipy.linalg import lapack
from threadpoolctl import threadpool_limits

from mics._linalg import solve_psd


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[60, 100, 300])
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("one BLAS thread; one right-hand side (as the channel-by-channel update)")
    print(f"{'n':>5s} {'solve_psd ms':>13s} {'dposv(C) ms':>12s} {'ratio':>7s} {'rel. diff':>10s}")
    with threadpool_limits(1, user_api="blas"):
        for n in args.sizes:
            F = rng.standard_normal((n, 2 * n))
            A = F @ F.T / n + np.eye(n)  # C-ordered, symmetric to rounding
            b = rng.standard_normal(n)
            t_new = median_time(partial(solve_psd, A, b), args.repeats)
            t_old = median_time(partial(lapack.dposv, A, b), args.repeats)
            x_new, x_old = solve_psd(A, b), lapack.dposv(A, b)[1]
            diff = np.max(np.abs(x_new - x_old)) / np.max(np.abs(x_old))
            times = f"{1e3 * t_new:13.3f} {1e3 * t_old:12.3f} {t_old / t_new:7.2f}"
            print(f"{n:5d} {times} {diff:10.1e}")


if __name__ == "__main__":
    main()
