"""The part of the modulator that the source and the session's slow drift predict.

A permutation (or circular-shift) null breaks the modulator's pairing with
the source and the target. When the modulator also depends on the source
(running drives V1) or drifts with the session (as the coupling may), the
null breaks those dependences too, and a channel fitted to the data can
take credit for them: a nonlinear source -> target map looks like the
source multiplied by a modulator that the source predicts, and a coupling
that declines with the session looks like gating by a modulator that
declines with it. A conditional null (Berrett, Wang, Barber & Samworth
2020, JRSS-B) keeps them: the modulator is split into its prediction from
the nuisance variables (a smooth function of session time and a ridge
regression on the source) and a residual, and only the residual is
permuted or shifted. The reduced model of the test uses the helpers here
too: hinges of each modulator (a piecewise-linear additive effect) and the
products of the source's leading communicated components (a quadratic,
drifting source -> target map).

Everything here works on cross-products ``A^T A`` of ``A = [G, X, Z]``
(``G`` the drift basis), total and per held-out fold, so that any backend
that can sum over rows (NumPy blocks, Dask chunks) supplies them in one
pass. The ridge penalty is chosen on the same folds as the model.
"""

from __future__ import annotations

import numpy as np
from scipy import interpolate, linalg

__all__ = [
    "communicated_directions",
    "source_terms",
    "hinge_knots",
    "modulator_hinges",
    "session_position",
    "drift_basis",
    "ConditionalFit",
    "conditional_ridge",
]


def communicated_directions(Sxx, Sxy, n, k, ridge=1e-6):
    """The source's ``k`` leading communicated directions (reduced-rank regression's).

    Parameters
    ----------
    Sxx : ndarray of shape (p, p)
        Centred source scatter.
    Sxy : ndarray of shape (p, q)
        Centred source-target cross scatter.
    n : int
        Samples behind the scatters.
    k : int
    ridge : float
        Relative ridge of the least-squares step (a fraction of the mean
        source variance), so that ``p >= n`` is defined.

    Returns
    -------
    W : ndarray of shape (p, k)
        Columns such that ``(X - mean) @ W`` are the communicated components,
        each of unit variance: the top eigenvectors of the fitted values'
        covariance (Semedo's reduced-rank step) mapped back to the source.
    """
    p = Sxx.shape[0]
    level = max(np.trace(Sxx) / max(p, 1), 1e-300)
    B = linalg.solve(Sxx + ridge * level * np.eye(p), Sxy, assume_a="pos")
    evals, evecs = linalg.eigh(B.T @ Sxx @ B)
    W = B @ evecs[:, ::-1][:, :k]
    var = np.einsum("ij,ij->j", W, Sxx @ W) / max(n, 1)
    return W / np.sqrt(np.where(var > 0, var, 1.0))


def source_terms(components, basis=None):
    """Columns of a nonlinear and drifting source -> target map, for the reduced model.

    Parameters
    ----------
    components : array of shape (n_samples, k)
        Centred communicated components (:func:`communicated_directions`);
        NumPy or Dask.
    basis : ndarray of shape (n_samples, g), optional
        The drift basis (:func:`drift_basis`; its first column, the
        constant, is skipped).

    Returns
    -------
    list of arrays of shape (n_samples, 1)
        Products ``u_i u_j`` (``i <= j``): a quadratic map; then, with
        ``basis``, ``b_l u_i``: a linear map that drifts over the session (the
        B-splines sum to one, so these also span the components themselves).
    """
    k = components.shape[1]
    pairs = [(i, j) for i in range(k) for j in range(i, k)]
    cols = [components[:, i : i + 1] * components[:, j : j + 1] for i, j in pairs]
    if basis is not None:
        cols += [basis[:, l : l + 1] * components[:, i : i + 1]
                 for l in range(1, basis.shape[1]) for i in range(k)]  # fmt: skip
    return cols


def hinge_knots(Z, n_knots=4):
    """Knots of each modulator column at its interior quantiles (ties merged).

    Parameters
    ----------
    Z : ndarray of shape (n_samples, m)
    n_knots : int
        Quantiles ``1 / (n_knots + 1) .. n_knots / (n_knots + 1)``.

    Returns
    -------
    knots : list of ndarray
        Per column, the distinct knots strictly above its minimum (a
        mostly-zero running speed keeps only the knots inside its bursts).
    """
    levels = np.arange(1, n_knots + 1) / (n_knots + 1)
    out = []
    for column in np.asarray(Z, dtype=float).T:
        k = np.unique(np.quantile(column, levels))
        out.append(k[k > column.min()])
    return out


def modulator_hinges(Z, knots):
    """Hinge functions ``max(z_j - k, 0)`` of each modulator column at its knots.

    With the columns themselves they span a piecewise-linear additive
    function of each modulator: enough to absorb a modulator effect that
    saturates, accelerates or is quadratic, with the leverage of a linear
    term (a cubic of a heavy-tailed running speed would let a few bursts
    decide the fit).

    Parameters
    ----------
    Z : ndarray of shape (n_samples, m)
    knots : list of ndarray
        From :func:`hinge_knots`.

    Returns
    -------
    ndarray of shape (n_samples, sum of knots)
    """
    Z = np.asarray(Z, dtype=float)
    cols = [np.maximum(Z[:, [j]] - k[None, :], 0.0) for j, k in enumerate(knots) if k.size]
    return np.hstack(cols) if cols else np.zeros((Z.shape[0], 0))


def session_position(n_samples, groups=None):
    """Where each sample lies in the session, from 0 (first) to 1 (last).

    Parameters
    ----------
    n_samples : int
    groups : ndarray of shape (n_samples,), optional
        Trial codes. A sample then takes its trial's position among the
        trials (in order of appearance), so the drift basis is constant
        within a trial and carries no within-trial time course.

    Returns
    -------
    position : ndarray of shape (n_samples,)
    """
    if groups is None:
        return np.linspace(0.0, 1.0, n_samples) if n_samples > 1 else np.zeros(n_samples)
    groups = np.asarray(groups)
    starts = np.r_[True, groups[1:] != groups[:-1]]
    order = np.cumsum(starts) - 1  # running trial index
    n_trials = order[-1] + 1 if n_samples else 0
    return order / max(n_trials - 1, 1)


def drift_basis(position, df):
    """A constant and a cubic B-spline basis of the session position.

    Parameters
    ----------
    position : ndarray of shape (n_samples,)
        In [0, 1] (:func:`session_position`).
    df : int
        Number of basis functions (``>= 1``); 1 gives a constant (no drift).
        ``df`` B-splines with equally spaced knots resolve trends down to a
        scale of about ``1 / (df - 2)`` of the session.

    Returns
    -------
    basis : ndarray of shape (n_samples, df) or (n_samples, df + 1)
        Its first column is the constant (the B-splines then span it too: the
        fits below use pseudo-inverses, so the collinearity is harmless).
    """
    position = np.asarray(position, dtype=float)
    df = int(df)
    if df < 1:
        raise ValueError(f"df must be at least 1, got {df}.")
    if df < 4:  # too few functions for cubic splines: polynomials of degree df - 1
        return np.vander(2 * position - 1, df, increasing=True)
    degree = 3
    inner = np.linspace(0.0, 1.0, df - degree + 1)
    knots = np.r_[[0.0] * degree, inner, [1.0] * degree]
    basis = interpolate.BSpline.design_matrix(np.clip(position, 0.0, 1.0), knots, degree)
    return np.column_stack([np.ones(position.size), basis.toarray()])


class ConditionalFit:
    """Coefficients of the modulator's prediction from the drift basis and the source.

    ``Z_fitted = G @ coef_drift + X @ coef_source``.

    Attributes
    ----------
    coef_drift : ndarray of shape (n_basis, m)
    coef_source : ndarray of shape (p, m)
        Zero when the source is not conditioned on.
    alpha : float
        Ridge penalty on the standardised source (relative to the number of
        training samples), chosen on the folds; NaN without the source.
    r2_drift : float
        Share of the modulator's variance that the drift basis explains
        (pooled over the modulator columns, each in units of its spread; in
        sample, adjusted for the basis's degrees of freedom counted in trials;
        0 without drift).
    r2_source : float
        Cross-validated share of the variance left by the drift basis that the
        source predicts on top (0 without the source).
    """

    def __init__(self, coef_drift, coef_source, alpha, r2_drift, r2_source, operator=None):
        self.coef_drift = coef_drift
        self.coef_source = coef_source
        self.alpha = alpha
        self.r2_drift = r2_drift
        self.r2_source = r2_source
        self._operator = operator

    def coefficients(self, Gv, Xv):
        """The same fit (same penalty) of another modulator-shaped array ``v``.

        Parameters
        ----------
        Gv : ndarray of shape (n_basis, k)
            ``G^T v``.
        Xv : ndarray of shape (p, k)
            ``X^T v`` (ignored without the source).

        Returns
        -------
        coef_drift : ndarray of shape (n_basis, k)
        coef_source : ndarray of shape (p, k)
        """
        basis_pinv, gamma_source, ridge = self._operator
        if ridge is None:
            return basis_pinv @ Gv, np.zeros((gamma_source.shape[1], Gv.shape[1]))
        beta = ridge @ (Xv - gamma_source.T @ Gv)
        return basis_pinv @ Gv - gamma_source @ beta, beta

    def __repr__(self):
        return (
            f"ConditionalFit(r2_drift={self.r2_drift:.3g}, r2_source={self.r2_source:.3g}, "
            f"alpha={self.alpha:.3g})"
        )


def _ridge_operator(XX, n, alpha):
    """``Q`` with ``Q @ XZ`` the ridge coefficients of :func:`_ridge_path` at one ``alpha``."""
    var = np.clip(np.diag(XX) / max(n, 1), 0.0, None)
    scale = np.sqrt(var)
    keep = scale > 1e-12 * max(scale.max(initial=0.0), 1e-300)
    d = np.where(keep, scale, 1.0)
    Xs = XX / np.outer(d, d)
    Xs[~keep] = 0.0
    Xs[:, ~keep] = 0.0
    evals, evecs = linalg.eigh(Xs)
    evals = np.clip(evals, 0.0, None)
    Q = (evecs / (evals + alpha * n)) @ evecs.T / np.outer(d, d)
    Q[~keep] = 0.0
    Q[:, ~keep] = 0.0
    return Q


def _ridge_path(XX, XZ, n, alphas):
    """Ridge coefficients of ``Z`` on the standardised ``X`` for each alpha (centred products)."""
    var = np.clip(np.diag(XX) / max(n, 1), 0.0, None)
    scale = np.sqrt(var)
    keep = scale > 1e-12 * max(scale.max(initial=0.0), 1e-300)
    d = np.where(keep, scale, 1.0)
    Xs = XX / np.outer(d, d)
    Xs[~keep] = 0.0
    Xs[:, ~keep] = 0.0
    XZs = XZ / d[:, None]
    XZs[~keep] = 0.0
    evals, evecs = linalg.eigh(Xs)
    evals = np.clip(evals, 0.0, None)
    proj = evecs.T @ XZs
    for alpha in alphas:
        beta = evecs @ (proj / (evals + alpha * n)[:, None]) / d[:, None]
        beta[~keep] = 0.0
        yield beta


def _residual_products(S, Gamma, g):
    """Cross-product of ``A - G Gamma`` (the basis regressed out) from that of ``A = [G, R]``."""
    SGG, SGR, SRR = S[:g, :g], S[:g, g:], S[g:, g:]
    return SRR - SGR.T @ Gamma - Gamma.T @ SGR + Gamma.T @ SGG @ Gamma


def conditional_ridge(
    total, n_total, folds, n_basis, n_source, *, use_source=True, alphas=None, n_units=None
):
    """Fit the modulator's prediction from the drift basis and the source.

    The basis is regressed out of the source and the modulator on all
    samples first (least squares; it has a few degrees of freedom), then the
    modulator's residual is ridge-regressed on the source's, the penalty
    chosen on the folds.

    Parameters
    ----------
    total : ndarray of shape (d, d)
        ``A^T A`` over all samples, ``A = [G, X, Z]``: ``n_basis`` basis
        columns (the first the constant, :func:`drift_basis`), ``n_source``
        source columns, then the modulator's.
    n_total : int
        Samples behind ``total``.
    folds : list of (ndarray of shape (d, d), int)
        Each held-out fold's cross-product and its number of samples.
    n_basis, n_source : int
    use_source : bool
        False: the basis alone (no ridge on the source).
    alphas : sequence of float, optional
        Candidate penalties on the standardised source, as multiples of the
        training samples, in increasing order; default 15 values from 1e-6 to
        1e1, log-spaced. The least-penalised one within one standard error of
        the best held-out error is used.
    n_units : int, optional
        Independent units (trials) behind the samples, for the degrees of
        freedom of ``r2_drift``; default ``n_total``.

    Returns
    -------
    ConditionalFit
    """
    g, p = int(n_basis), int(n_source)
    alphas = np.logspace(-6, 1, 15) if alphas is None else np.asarray(alphas, dtype=float)
    # Each modulator column in units of its own spread: the penalty chosen and
    # the R^2s reported then weigh the columns alike, whatever their units.
    spread = np.diag(total)[g + p :] - total[0, g + p :] ** 2 / n_total
    spread = np.sqrt(np.maximum(spread, 0.0) / n_total)
    spread = np.where(spread > 1e-12 * max(spread.max(initial=0.0), 1e-300), spread, 1.0)
    unit = np.concatenate([np.ones(g + p), 1.0 / spread])
    total = total * np.outer(unit, unit)
    folds = [(S * np.outer(unit, unit), n) for S, n in folds]
    basis_pinv = linalg.pinvh(total[:g, :g])
    Gamma = basis_pinv @ total[:g, g:]  # basis -> [X, Z]
    R = _residual_products(total, Gamma, g)
    ZZ_total = total[g + p :, g + p :] - np.outer(total[0, g + p :], total[0, g + p :]) / n_total
    ZZ_resid = R[p:, p:]
    # Adjusted R^2 of the basis (in sample, degrees of freedom counted in units).
    units = n_total if n_units is None else int(n_units)
    k = np.linalg.matrix_rank(total[:g, :g]) - 1
    tss, rss = float(np.trace(ZZ_total)), float(np.trace(ZZ_resid))
    r2_drift = 0.0
    if tss > 0 and k > 0 and units > k + 1:
        r2_drift = 1.0 - (rss / tss) * (units - 1) / (units - k - 1)
    coef_source = np.zeros((p, ZZ_resid.shape[0]))
    alpha, r2_source = np.nan, 0.0
    if use_source and p:
        errors = []  # (fold, alpha) held-out error per sample
        base = 0.0
        for S_test, n_test in folds:
            Rt = _residual_products(S_test, Gamma, g)
            Rtrain = R - Rt
            n_train = n_total - n_test
            XX, XZ = Rtrain[:p, :p], Rtrain[:p, p:]
            XXt, XZt, ZZt = Rt[:p, :p], Rt[:p, p:], Rt[p:, p:]
            errs = [
                max(float(np.trace(ZZt) - 2 * np.sum(b * XZt) + np.sum(b * (XXt @ b))), 0.0)
                for b in _ridge_path(XX, XZ, n_train, alphas)
            ]
            errors.append(np.asarray(errs) / max(n_test, 1))
            base += float(np.trace(ZZt))
        errors = np.asarray(errors)
        mean = errors.mean(axis=0)
        best = int(np.argmin(mean))
        sem = errors[:, best].std(ddof=1) / np.sqrt(len(errors)) if len(errors) > 1 else 0.0
        # The least-penalised alpha within one standard error of the best:
        # shrinkage leaves part of what the source predicts in the residual
        # that the null permutes, breaking a dependence the data keep (an
        # anti-conservative test); fitting a little noise instead keeps part
        # of the residual in place (conservative).
        best = int(np.flatnonzero(mean <= mean[best] + sem)[0])
        alpha = float(alphas[best])
        coef_source = next(_ridge_path(R[:p, :p], R[:p, p:], n_total, [alpha]))
        held_out = float(np.sum(errors[:, best] * [n for _, n in folds]))
        r2_source = 1.0 - held_out / base if base > 0 else 0.0
    coef_drift = (Gamma[:, p:] - Gamma[:, :p] @ coef_source) * spread
    coef_source = coef_source * spread
    ridge = _ridge_operator(R[:p, :p], n_total, alpha) if use_source and p else None
    operator = (basis_pinv, Gamma[:, :p], ridge)
    return ConditionalFit(
        coef_drift, coef_source, alpha, float(r2_drift), float(r2_source), operator
    )
