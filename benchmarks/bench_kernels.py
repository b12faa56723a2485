"""Where numba wins and where BLAS was kept: each kernel against its NumPy route.

Prints, per kernel, the median time of the numba kernel and of the best
NumPy formulation of the same computation, measured in the same run, and
their ratio. The NumPy routes of the two kernels on the moment path are the
code they replaced: the chunk fill of ``compute_moments`` and the centring
of ``RawMoments.centered`` (four passes over ``G``, a transposed copy, and
the operator's (a, b, i, j) copy of ``M``).
Run: ``python benchmarks/bench_kernels.py [--p 300 --m 3 --K 4]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from threadpoolctl import threadpool_limits

from mics import _kernels
from mics.moments import compute_moments


def median_time(func, repeats):
    func()  # warm-up (compilation, caches)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--p", type=int, default=300)
    parser.add_argument("--m", type=int, default=3)
    parser.add_argument("--K", type=int, default=4)
    parser.add_argument("--rows", type=int, default=3000, help="rows per moment chunk")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    p, m, K, n = args.p, args.m, args.K, args.rows
    rng = np.random.default_rng(0)
    X, Z = rng.standard_normal((n, p)), rng.standard_normal((n, m))
    xs, zs = X.mean(0), Z.mean(0)
    F = rng.standard_normal((4 * p * m, p * m))
    M = (F.T @ F).reshape(p, m, p, m)
    Mt = np.ascontiguousarray(M.transpose(0, 1, 3, 2))
    C, A = rng.standard_normal((m, K)), rng.standard_normal((p, K))

    Xt = np.column_stack([np.ones(n), X - xs])
    w = (Z[:, 0] - zs[0]) * (Z[:, 1 % m] - zs[1 % m])
    pos, neg = np.empty_like(Xt), np.empty_like(Xt)

    def split_numpy():
        scaled = Xt * np.sqrt(np.abs(w))[:, None]
        return scaled[w > 0], scaled[w < 0]

    def modes_numpy():
        T1 = np.tensordot(M, C, axes=([3], [0]))  # (p, m, p, K)
        return np.einsum("ak,iajl->klij", C, T1, optimize=True)

    def source_blas():
        # what MomentOperator.gram_modulator does (kept in BLAS: it wins)
        T1 = (Mt.reshape(p * m * m, p) @ A).reshape(p, m * m * K)
        return (A.T @ T1).reshape(K, m, m, K).transpose(0, 3, 1, 2)

    # moment path: one chunk of Khatri-Rao rows, and the centring of a raw Gram
    q = max(1, p // 3)
    Y = rng.standard_normal((n, q))
    ys = Y.mean(0)
    rows = np.empty((n, (p + 1) * (m + 1) + q))

    def fill_numpy():
        d = (p + 1) * (m + 1)
        U = rows[:, :d].reshape(n, m + 1, p + 1)
        U[:, 0, 0] = 1.0
        np.subtract(X, xs, out=U[:, 0, 1:])
        np.multiply(U[:, :1, :], (Z - zs)[:, :, None], out=U[:, 1:])
        np.subtract(Y, ys, out=rows[:, d:])

    raw = compute_moments(X, Y, Z, shifts=(np.zeros(p), np.zeros(m), np.zeros(q)))
    G, N = raw.G, raw.n
    dx, dz = G[1:, 0, 0, 0] / N, G[0, 1:, 0, 0] / N
    phi_sum = raw.centered().phi_mean * N
    Mab = np.empty((m, m, p, p))

    def centre_numpy():
        def lead(A):
            A[1:] -= dx[:, None, None, None] * A[0][None]
            A[:, 1:] -= dz[None, :, None, None] * A[:, 0][:, None]
            return A

        d = G.shape[0] * G.shape[1]
        Gc = lead(np.ascontiguousarray(lead(G.copy()).reshape(d, d).T).reshape(G.shape))
        ps = Gc[1:, 1:, 0, 0]
        M = Gc[1:, 1:, 1:, 1:] - np.einsum("ia,jb->iajb", ps, ps / N)
        return np.ascontiguousarray(M.transpose(1, 3, 0, 2))

    cases = [
        (
            "khatri_rao_rows (moment pass)",
            lambda: _kernels.khatri_rao_rows(X, Z, Y, xs, zs, ys, 0, rows),
            fill_numpy,
        ),
        (
            "centre_interaction (centring)",
            lambda: _kernels.centre_interaction(G, dx, dz, phi_sum, float(N), Mab),
            centre_numpy,
        ),
        (
            "split_weighted_rows (moments)",
            lambda: _kernels.split_weighted_rows(Xt, w, pos, neg),
            split_numpy,
        ),
        (
            "contract_modulator_modes",
            lambda: _kernels.contract_modulator_modes(Mt, C),
            modes_numpy,
        ),
    ]
    print(f"p={p} m={m} K={K} rows={n}; one BLAS thread (as inside the fits)")
    print(f"{'kernel':32s} {'numba ms':>9s} {'numpy ms':>9s} {'numpy/numba':>12s}")
    with threadpool_limits(limits=1, user_api="blas"):
        for name, fast, slow in cases:
            t_fast = median_time(fast, args.repeats)
            t_slow = median_time(slow, args.repeats)
            print(f"{name:32s} {1e3 * t_fast:9.2f} {1e3 * t_slow:9.2f} {t_slow / t_fast:12.2f}")
        t_src = median_time(source_blas, args.repeats)
    print(f"{'(kept in BLAS) source-mode contr.':32s} {1e3 * t_src:9.2f}")
    # The rank-k updates stay with BLAS (dsyrk runs at peak).
    A = split_numpy()[0]
    t_syrk = median_time(lambda: A.T @ A, max(3, args.repeats // 4))
    print(f"{'(kept in BLAS) rank-k update':32s} {1e3 * t_syrk:9.2f}")


if __name__ == "__main__":
    main()
