"""Least squares with cluster-robust standard errors, and false-discovery control.

The member tests of :func:`mics.workflows.member_neurons` ask, one neuron at
a time, whether a coefficient of a linear regression is zero, on samples
that are autocorrelated within trials (or contiguous blocks of time) and
independent between them. Ordinary least-squares standard errors assume
independent samples and are too small on such data; the sandwich
estimator summed over clusters (Liang & Zeger 1986) is not, given enough
clusters. With hundreds of regressors the raw residuals are visibly
smaller than the errors (each cluster's residuals are shrunk by its
leverage), so the residuals are first inflated by ``(I - H_gg)^(-1/2)``,
``H_gg`` the cluster's block of the hat matrix: the "CR2" correction of
Bell & McCaffrey (2002), exact for independent homoscedastic errors. The
reference distribution is Student's t with ``G - 1`` degrees of freedom for
``G`` clusters.

False-discovery control is :func:`scipy.stats.false_discovery_control`
(Benjamini-Hochberg, or Benjamini-Yekutieli for arbitrary dependence).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy import linalg, stats

__all__ = [
    "ClusteredFit",
    "clustered_ols",
    "cluster_codes",
    "fdr_select",
    "residual_autocorrelation",
]

# Singular values below this fraction of the largest mark a column as a
# linear combination of the others.
_RANK_TOL = 1e-10
# Beyond this many clusters the Satterthwaite degrees of freedom are not
# computed (they need n_clusters x n_columns x n_tested numbers) and G - 1 is
# used: with that many clusters Student's t is the normal distribution to the
# third decimal of a p-value, and the correction matters with few clusters.
_MAX_DOF_CLUSTERS = 100
# A cluster whose leverage reaches 1 (a block that the design fits exactly)
# carries no residual information; the CR2 factor is capped there.
_MAX_LEVERAGE = 1.0 - 1e-8


@dataclass
class ClusteredFit:
    """Tested coefficients of :func:`clustered_ols`.

    Attributes
    ----------
    estimate : ndarray of shape (n_tested, n_responses)
        Least-squares coefficients of the tested columns.
    std_error : ndarray of shape (n_tested, n_responses)
        Cluster-robust (CR2) standard errors.
    statistic : ndarray of shape (n_tested, n_responses)
        ``estimate / std_error``.
    p_value : ndarray of shape (n_tested, n_responses)
        Two-sided, from Student's t with ``dof`` degrees of freedom.
    dof : ndarray of shape (n_tested,)
        Bell-McCaffrey (Satterthwaite) degrees of freedom of each tested
        coefficient's CR2 variance with at most 100 clusters; ``n_clusters -
        1`` with more (Student's t is then the normal distribution to the
        precision of a p-value).
    n_clusters : int
    n_columns : int
        Independent columns of the whole design (controls and tested).
    joint_statistic, joint_p_value : ndarray of shape (n_responses,) or None
        With ``joint=True``: the Wald test that every tested coefficient is
        zero (``W / n_tested``, F-distributed with ``(n_tested,
        n_clusters - 1)`` degrees of freedom under the null).
    """

    estimate: np.ndarray
    std_error: np.ndarray
    statistic: np.ndarray
    p_value: np.ndarray
    dof: np.ndarray
    n_clusters: int
    n_columns: int
    joint_statistic: np.ndarray | None = None
    joint_p_value: np.ndarray | None = None


def cluster_codes(clusters):
    """Consecutive integer codes 0..G-1 of cluster labels, and the number G."""
    _, codes = np.unique(np.asarray(clusters), return_inverse=True)
    return codes.reshape(-1), int(codes.max()) + 1 if codes.size else 0


def _orthonormal_basis(A):
    """Orthonormal basis of the column span of ``A`` (rank-revealing, via the SVD)."""
    if A.shape[1] == 0:
        return A[:, :0]
    U, s, _ = linalg.svd(A, full_matrices=False)
    keep = s > _RANK_TOL * s[0] if s.size and s[0] > 0 else np.zeros(s.size, bool)
    return U[:, keep]


def clustered_ols(controls, tested, response, clusters, autocorrelation=0.0, joint=False):
    """Least squares of ``response`` on ``[controls, tested]``; CR2 inference on ``tested``.

    Parameters
    ----------
    controls : array-like of shape (n_samples, n_controls)
        Regressors whose coefficients are not tested (include a column of
        ones for an intercept). Collinear columns are allowed: only their
        span matters.
    tested : array-like of shape (n_samples, n_tested)
        Regressors whose coefficients are tested, one at a time. They must
        be linearly independent of each other and of the controls.
    response : array-like of shape (n_samples,) or (n_samples, n_responses)
        One or several responses fitted on the same design.
    clusters : array-like of shape (n_samples,)
        Cluster label of every sample (trial, or contiguous block of time):
        errors may be correlated within a cluster, not between clusters.
        Samples of a cluster must be consecutive and in time order when
        ``autocorrelation`` is used.
    autocorrelation : float in [0, 1), default=0.0
        Lag-1 autocorrelation ``rho`` of the errors within clusters. When
        positive, every column and the response are prewhitened first by
        the Prais-Winsten transform (``v_t - rho v_(t-1)``, the first sample
        of each cluster times ``sqrt(1 - rho^2)``), which leaves the
        coefficients' meaning unchanged and removes an AR(1) error's
        autocorrelation; the cluster-robust errors cover what remains. With
        hundreds of autocorrelated regressors CR2 alone understates the
        variance (about 10% in the t statistic's spread at ``rho = 0.8``), as
        its leverage correction assumes independent errors. Estimate ``rho``
        from out-of-sample residuals (:func:`residual_autocorrelation`).
    joint : bool, default=False
        Also test all tested coefficients at once (per response): the Wald
        statistic with their CR2 covariance, divided by their number, referred
        to the F distribution with ``(n_tested, n_clusters - 1)`` degrees of
        freedom. The test does not change when tested columns change sign.

    Returns
    -------
    ClusteredFit
        With arrays of shape (n_tested, n_responses) (a 1-D response gives
        one column).

    Raises
    ------
    ValueError
        When the shapes disagree, an input is not finite, there are fewer
        than two clusters, or a tested column is (nearly) a linear
        combination of the controls and the other tested columns.

    Notes
    -----
    By the Frisch-Waugh-Lovell theorem the tested coefficients are those of
    the regression of the residualised response on the residualised tested
    columns (both residualised on the controls), and so is the tested block
    of the sandwich. The CR2 adjustment uses each cluster's block of the
    *full* hat matrix, ``H_gg = Q_g Q_g^T`` with ``Q`` an orthonormal basis
    of the whole design.
    """
    design = _design(controls, tested, response, clusters, autocorrelation)
    G = design.n_clusters
    fit = _tested_fit(design.controls, design.tested, design.response)
    sums = _cr2_sums(fit.basis, fit.weights, fit.resid, design.codes, n_clusters=G, joint=joint)
    estimate = fit.estimate
    std_error = np.sqrt(sums.meat)
    with np.errstate(divide="ignore", invalid="ignore"):
        statistic = np.where(std_error > 0, estimate / std_error, 0.0)
    p_value = 2.0 * stats.t.sf(np.abs(statistic), sums.dof[:, None])
    joint_statistic = joint_p_value = None
    if joint:
        joint_statistic, joint_p_value = _joint_wald(estimate, sums.cov, G)
    return ClusteredFit(
        estimate=estimate,
        std_error=std_error,
        statistic=statistic,
        p_value=p_value,
        dof=sums.dof,
        n_clusters=G,
        n_columns=fit.n_columns,
        joint_statistic=joint_statistic,
        joint_p_value=joint_p_value,
    )


class _Design(NamedTuple):
    """Arrays of :func:`clustered_ols`, checked and prewhitened, with the cluster codes."""

    controls: np.ndarray
    tested: np.ndarray
    response: np.ndarray  # 2-D
    codes: np.ndarray
    n_clusters: int


def _design(controls, tested, response, clusters, autocorrelation):
    """Check the inputs of :func:`clustered_ols` and prewhiten them for ``autocorrelation``.

    Raises the ``ValueError`` of :func:`clustered_ols` for shapes, non-finite
    values, fewer than two clusters and ``autocorrelation`` outside [0, 1).
    """
    C = np.asarray(controls, dtype=float)
    W = np.asarray(tested, dtype=float)
    Y = np.asarray(response, dtype=float)
    Y = Y[:, None] if Y.ndim == 1 else Y
    n = W.shape[0]
    if C.ndim != 2 or W.ndim != 2 or Y.ndim != 2:
        raise ValueError("controls and tested must be 2-D, response 1-D or 2-D.")
    if C.shape[0] != n or Y.shape[0] != n:
        raise ValueError(
            f"controls, tested and response must have the same rows, got {C.shape[0]}, "
            f"{n} and {Y.shape[0]}."
        )
    for name, a in (("controls", C), ("tested", W), ("response", Y)):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} holds NaN or infinite values.")
    codes, G = cluster_codes(clusters)
    if codes.size != n:
        raise ValueError(f"clusters has {codes.size} entries for {n} samples.")
    if G < 2:
        raise ValueError("cluster-robust inference needs at least two clusters.")
    rho = float(autocorrelation)
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"autocorrelation must lie in [0, 1), got {autocorrelation!r}.")
    if rho > 0:
        C, W, Y = (_quasi_difference(a, codes, rho) for a in (C, W, Y))
    return _Design(C, W, Y, codes, G)


class _TestedFit(NamedTuple):
    """Least-squares fit of the tested coefficients (:func:`_tested_fit`)."""

    estimate: np.ndarray  # (n_tested, n_responses)
    resid: np.ndarray  # (n_samples, n_responses)
    basis: np.ndarray  # orthonormal basis of the whole design, (n_samples, n_columns)
    weights: np.ndarray  # estimate = weights.T @ response, (n_samples, n_tested)
    n_columns: int


def _tested_fit(C, W, Y):
    """Tested coefficients through the controls-residualised regression (Frisch-Waugh-Lovell).

    Raises ``ValueError`` when a tested column is not identified or no
    residual degrees of freedom are left.
    """
    n = W.shape[0]
    Qc = _orthonormal_basis(C)
    Wr = W - Qc @ (Qc.T @ W)
    Yr = Y - Qc @ (Qc.T @ Y)
    Qt, Rt = linalg.qr(Wr, mode="economic")
    scale = np.linalg.norm(W, axis=0)
    scale[scale == 0] = 1.0
    # a tested column (nearly) in the span of the others has no coefficient of its own
    if W.shape[1] and np.any(np.abs(np.diag(Rt)) <= 1e-8 * scale):
        bad = np.flatnonzero(np.abs(np.diag(Rt)) <= 1e-8 * scale)
        raise ValueError(
            f"tested column(s) {bad.tolist()} are linear combinations of the controls and "
            "the other tested columns: their coefficients are not identified."
        )
    if Qc.shape[1] + Qt.shape[1] >= n:
        raise ValueError(
            f"the design has {Qc.shape[1] + Qt.shape[1]} independent columns for {n} samples: "
            "no residual degrees of freedom."
        )
    proj = Qt.T @ Yr
    estimate = linalg.solve_triangular(Rt, proj)
    resid = Yr - Qt @ proj
    Q = np.hstack([Qc, Qt])
    weights = Qt @ linalg.solve_triangular(Rt, np.eye(Rt.shape[0])).T
    return _TestedFit(estimate, resid, Q, weights, Qc.shape[1] + Qt.shape[1])


class _CR2Sums(NamedTuple):
    """Sums over clusters of :func:`_cr2_sums`."""

    meat: np.ndarray  # CR2 variances, (n_tested, n_responses)
    cov: np.ndarray | None  # CR2 covariances with joint, (n_tested, n_tested, n_responses)
    dof: np.ndarray  # (n_tested,)


def _cr2_sums(Q, weights, resid, codes, *, n_clusters, joint):
    """CR2 variances (and covariances) of the tested coefficients, and their degrees of freedom.

    One pass over the clusters: each adjusts its block of ``weights`` by
    ``(I - H_gg)^(-1/2)`` and adds its scores; the Satterthwaite terms are
    collected on the way when there are few enough clusters.
    """
    G = n_clusters
    n_tested, n_responses = weights.shape[1], resid.shape[1]
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    meat = np.zeros((n_tested, n_responses))
    cov = np.zeros((n_tested, n_tested, n_responses)) if joint else None
    satterthwaite = G <= _MAX_DOF_CLUSTERS
    norms = np.zeros((G, n_tested))
    proj_w = np.zeros((G, Q.shape[1], n_tested) if satterthwaite else (0, 0, 0))
    for g, idx in enumerate(np.split(order, bounds)):
        Qg = Q[idx]
        # CR2: (I - Q_g Q_g^T)^(-1/2), applied through the SVD of Q_g
        U, s, _ = linalg.svd(Qg, full_matrices=False)
        factor = (1.0 - np.minimum(s**2, _MAX_LEVERAGE)) ** -0.5 - 1.0
        wg = weights[idx]
        vg = wg + U @ (factor[:, None] * (U.T @ wg))  # (n_g, n_tested)
        score = vg.T @ resid[idx]  # (n_tested, n_responses)
        meat += score**2
        if joint:
            cov += score[:, None, :] * score[None, :, :]
        if satterthwaite:
            norms[g] = np.sum(vg**2, axis=0)
            proj_w[g] = Qg.T @ vg
    if not satterthwaite:
        return _CR2Sums(meat, cov, np.full(n_tested, float(G - 1)))
    return _CR2Sums(meat, cov, _bell_mccaffrey_dof(norms, proj_w))


def _joint_wald(estimate, cov, n_clusters):
    """Wald statistic of all tested coefficients, over their number, and its F p-value.

    One of each per response, with the CR2 covariance ``cov`` of :func:`_cr2_sums`.
    """
    t = estimate.shape[0]
    joint_statistic = np.array(
        [estimate[:, j] @ np.linalg.pinv(cov[:, :, j]) @ estimate[:, j] / t
         for j in range(estimate.shape[1])]
    )  # fmt: skip
    return joint_statistic, stats.f.sf(joint_statistic, t, n_clusters - 1)


def _bell_mccaffrey_dof(norms, proj_w):
    """Satterthwaite degrees of freedom of each CR2 variance (Bell & McCaffrey 2002).

    Under the working model of independent homoscedastic errors, the CR2
    variance of coefficient ``i`` is a quadratic form ``e^T G_i G_i^T e``
    whose ``n x G`` matrix has columns ``(I - H)[:, g] A_g w_g``; the
    degrees of freedom are ``tr(M)^2 / tr(M^2)`` with ``M = G_i^T G_i``.
    Because ``Q`` is orthonormal, ``M = diag(|v_g|^2) - P^T P`` with
    ``v_g = A_g w_g`` and ``P`` the columns ``Q_g^T v_g`` (Imbens & Kolesar
    2016, section 4), so no ``n x n`` matrix is formed.

    Parameters
    ----------
    norms : ndarray of shape (n_clusters, n_tested)
        ``|v_g|^2``.
    proj_w : ndarray of shape (n_clusters, n_columns, n_tested)
        ``Q_g^T v_g``.

    Returns
    -------
    ndarray of shape (n_tested,)
    """
    out = np.empty(norms.shape[1])
    for i in range(norms.shape[1]):
        M = -proj_w[:, :, i] @ proj_w[:, :, i].T
        M[np.diag_indices_from(M)] += norms[:, i]
        trace = np.trace(M)
        out[i] = trace**2 / np.sum(M**2) if trace > 0 else 1.0
    return out


def residual_autocorrelation(residuals, clusters):
    """Lag-1 autocorrelation of residuals within clusters, pooled over clusters and columns.

    Parameters
    ----------
    residuals : array-like of shape (n_samples,) or (n_samples, n_columns)
        Residuals in time order. They should be out of sample (of a model
        fitted on other data): in-sample residuals of a regression with many
        autocorrelated regressors lose much of their autocorrelation to the
        fit (0.53 instead of 0.8 with 300 AR(1) regressors and 2000 samples).
    clusters : array-like of shape (n_samples,)

    Returns
    -------
    float
        ``sum u_t u_(t-1) / sum u_t^2`` over consecutive samples of the same
        cluster, clipped to [0, 0.98].
    """
    U = np.asarray(residuals, dtype=float)
    U = U[:, None] if U.ndim == 1 else U
    codes, _ = cluster_codes(clusters)
    same = codes[1:] == codes[:-1]
    num = np.sum(U[1:][same] * U[:-1][same])
    den = np.sum(U**2)
    return float(np.clip(num / den, 0.0, 0.98)) if den > 0 else 0.0


def _quasi_difference(A, codes, rho):
    """Prais-Winsten transform within clusters: ``a_t - rho a_(t-1)``, first row scaled."""
    out = A.copy()
    same = np.r_[False, codes[1:] == codes[:-1]]
    out[same] = A[same] - rho * A[np.flatnonzero(same) - 1]
    out[~same] = A[~same] * np.sqrt(1.0 - rho**2)
    return out


def fdr_select(p_values, fdr, method="bh"):
    """Hypotheses rejected at false-discovery rate ``fdr``, and the adjusted p-values.

    Parameters
    ----------
    p_values : array-like of shape (n_hypotheses,)
        NaN entries are not tested (never rejected, adjusted p-value NaN).
    fdr : float in (0, 1)
        Target false-discovery rate.
    method : {"bh", "by"}, default="bh"
        Benjamini-Hochberg (1995), which controls the FDR at ``fdr`` for
        independent or positively dependent (PRDS) p-values, or
        Benjamini-Yekutieli (2001), which controls it under any dependence
        at the price of a factor ``sum_{i <= n} 1/i`` in the threshold.

    Returns
    -------
    rejected : ndarray of bool, shape (n_hypotheses,)
    adjusted : ndarray of shape (n_hypotheses,)
        The adjusted p-values (q-values): ``rejected == (adjusted <= fdr)``.
    """
    if method not in ("bh", "by"):
        raise ValueError(f"method must be 'bh' or 'by', got {method!r}.")
    if not 0 < fdr < 1:
        raise ValueError(f"fdr must lie in (0, 1), got {fdr!r}.")
    p = np.asarray(p_values, dtype=float).reshape(-1)
    adjusted = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise ValueError("p-values must lie in [0, 1].")
    if ok.any():
        adjusted[ok] = stats.false_discovery_control(p[ok], method=method)
    return np.where(ok, adjusted <= fdr, False), adjusted
