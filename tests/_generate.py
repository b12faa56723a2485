"""A minimal ground-truth generator for the estimator tests (independent of mics.simulate)."""

import numpy as np


def make_mic_data(
    T=1500, p=100, q=80, m=3, r=3, K=2, noise=1.0, weights=(5.0, 3.75), offset=True, seed=0
):
    """X (T, p), Y (T, q), Z (T, m) and the true parameters, orthonormal patterns."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, p))
    Z = rng.standard_normal((T, m))
    U = np.linalg.qr(rng.standard_normal((p, r)))[0]
    V = np.linalg.qr(rng.standard_normal((q, r)))[0]
    B = U @ np.diag(np.linspace(3.0, 1.5, r)) @ V.T
    D = 0.3 * rng.standard_normal((m, q))
    A = np.linalg.qr(rng.standard_normal((p, K)))[0]
    Bm = np.linalg.qr(rng.standard_normal((q, K)))[0]
    C = np.linalg.qr(rng.standard_normal((m, K)))[0]
    lam = np.asarray(weights[:K], dtype=float)
    Y = X @ B + Z @ D + ((X @ A) * (Z @ C) * lam) @ Bm.T + noise * rng.standard_normal((T, q))
    if offset:  # raw signals have offsets: the model must centre them itself
        X, Y, Z = X + 2.0, Y - 1.0, Z + 0.5
    truth = dict(B=B, D=D, A=A, Bm=Bm, C=C, weights=lam, U=U, V=V)
    return X, Y, Z, truth


def factor_match(truth, model):
    """Per-channel product of |cosines| after greedy matching (tests only)."""
    from scipy.optimize import linear_sum_assignment

    sim = (
        np.abs(truth["A"].T @ model.source_patterns_)
        * np.abs(truth["Bm"].T @ model.target_patterns_)
        * np.abs(truth["C"].T @ model.modulator_patterns_)
    )
    rows, cols = linear_sum_assignment(-sim)
    return sim[rows, cols]


def tensor_error(truth, model):
    W = np.einsum("k,ik,jk,ak->ija", truth["weights"], truth["A"], truth["Bm"], truth["C"])
    return np.linalg.norm(model.modulation_tensor() - W) / np.linalg.norm(W)
