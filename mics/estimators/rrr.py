"""scikit-learn estimators: thin classes over the functional core.

``__init__`` only stores hyperparameters; validation happens in ``fit``;
learned state ends in ``_``. Coefficients follow scikit-learn's
(n_targets, n_features) convention.
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator

from mics.core.heldout import normalized_squared_error, sums_heldout_loss
from mics.core.rrr import constant_columns, fit_reduced_rank
from mics.core.sparse_rrr import SparseRRRPaths, sparse_rrr_path_from_sums
from mics.data.folds import cv_splits
from mics.data.problem import make_problem
from mics.data.validation import check_alpha, check_folds, check_rank
from mics.estimators.base import CommunicationSubspaceMixin, validate_xy
from mics.model.selection import cross_validate_rank, summarize_cv, warn_fold_outliers

__all__ = ["ReducedRankRegression", "ReducedRankRegressionCV"]

# Candidate sparsities of ``ReducedRankRegressionCV(sparsity="cv")``, sparsest
# first (the one-SEM rule prefers the first): from "none of 50 pure-noise
# targets" (8 and above, see ReducedRankRegression) down to the dense fit.
SPARSITY_GRID = (16.0, 12.0, 8.0, 6.0, 4.0, 3.0, 2.0, 1.0, 0.0)
# Ranks in a row that do not lower the best held-out loss of the joint table
# before the larger ranks are left unfitted (ReducedRankRegressionCV._choose).
_RANK_PATIENCE = 2


class ReducedRankRegression(CommunicationSubspaceMixin, BaseEstimator):
    """Reduced-rank regression: the communication subspace of Semedo et al. (2019).

    Least-squares (or ridge) coefficients of target on source, projected
    onto the top ``rank`` principal directions of the fitted values. With
    ``alpha > 0`` this is the reference code's *ridge-initialised* RRR: the
    ridge solution is projected in the same way.

    With ``sparsity > 0`` it is the sparse reduced-rank regression of Kobak
    et al. (2021): a group lasso on the rows of the source loadings sets
    whole source neurons to zero in every dimension of the subspace
    (:func:`mics.core.fit_sparse_rrr`); ``source_members_`` lists
    the neurons kept.

    Parameters
    ----------
    rank : int, default=1
        Dimensionality of the communication subspace (0 predicts the mean).
    alpha : float, default=0.0
        Ridge penalty on the full-rank coefficients, in the units of the
        centred scatter ``X^T X`` (the reference's ``lambda``; see
        :func:`mics.core.ridge_lambda_grid`).
    sparsity : float, default=0.0
        Group-lasso weight on the source neurons, relative to the data: in
        standard errors of the loss gradient at a neuron that carries
        nothing (the convention of ``MICs(sparsity=...)``), so it does not
        depend on the units of X or Y. 0 (default) is the dense fit above,
        unchanged. On pure noise (T = 1000, 100 source and 50 target
        neurons, rank 2) ``sparsity=4`` still keeps 2 or 3 neurons: the
        subspace turns towards the noise correlations of the neurons it
        keeps, whose gradient then grows to about ``sqrt(n_target)``
        standard errors; ``sparsity=8`` keeps none. With
        ``sparsity > 0`` the ridge ``alpha`` is the exact elastic-net ridge
        (the fit minimises ``||Y - X W V^T||^2 + alpha ||W||^2 + lam
        sum_i ||W[i]||``), which differs slightly from the reference's
        ridge-initialised projection at ``alpha > 0``.

    Attributes
    ----------
    coef_ : ndarray of shape (n_target, n_source)
        ``Y_pred = X @ coef_.T + intercept_``. Zero-variance source neurons
        are dropped from the fit and get zero weight.
    intercept_ : ndarray of shape (n_target,)
    source_subspace_ : ndarray of shape (n_source, rank)
        Orthonormal basis of the source communication subspace.
    target_subspace_ : ndarray of shape (n_target, rank)
        Orthonormal basis of the target communication subspace.
    singular_values_ : ndarray of shape (rank,)
    source_members_ : ndarray of int
        Indices of the source neurons with a non-zero row of ``coef_.T``:
        every varying neuron when ``sparsity=0``, the selected ones otherwise.
    loss_history_ : ndarray
        With ``sparsity > 0``: penalised loss at the start (the dense fit)
        and after each alternation; never increases.
    n_iter_ : int
        With ``sparsity > 0``: alternations of the sparse fit.
    """

    def __init__(self, rank=1, alpha=0.0, sparsity=0.0):
        self.rank = rank
        self.alpha = alpha
        self.sparsity = sparsity

    def fit(self, X, y):
        """Fit the communication subspace.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
            Source population activity.
        y : array-like of shape (n_samples, n_target) or (n_samples,)
            Target population activity.

        Returns
        -------
        self
        """
        X, Y, y_1d = validate_xy(self, X, y)
        rank = check_rank(self.rank, X.shape[1], Y.shape[1])
        check_alpha(self.alpha)
        check_alpha(self.sparsity, name="sparsity")
        if self.sparsity == 0:
            (B,), (b,) = fit_reduced_rank(X, Y, [rank], alpha=self.alpha)
        else:
            B, b = self._fit_sparse(X, Y, rank)
        self._set_baseline(B, b, rank)
        self.source_members_ = np.flatnonzero(np.any(B != 0, axis=1))
        return self._finish(y_1d)

    def _fit_sparse(self, X, Y, rank):
        """Sparse RRR from the centred moments (zero-variance neurons dropped first)."""
        (B,), (b,), (fit,) = _sparse_on_arrays(X, Y, rank, [self.sparsity], self.alpha)
        self.loss_history_ = fit.loss_history
        self.n_iter_ = fit.n_iter
        return B, b


def _sparse_on_arrays(X, Y, rank, sparsities, alpha):
    """Sparse RRR of arrays at several sparsities: coefficients, intercepts, fits."""
    paths = _paths_on_arrays(X, Y, alpha)
    fits = paths.path(min(rank, int(paths.keep.sum())), sparsities)
    coefs = []
    for fit in fits:
        B = np.zeros((X.shape[1], Y.shape[1]))
        B[paths.keep] = fit.coef
        coefs.append(B)
    x_mean, y_mean = paths.means
    return coefs, [y_mean - x_mean @ B for B in coefs], fits


def _paths_on_arrays(X, Y, alpha):
    """:class:`mics.core.sparse_rrr.SparseRRRPaths` of arrays (zero-variance neurons left out)."""
    keep = ~constant_columns(X)
    x_mean, y_mean = X.mean(axis=0), Y.mean(axis=0)
    Xc, Yc = X[:, keep] - x_mean[keep], Y - y_mean
    return SparseRRRPaths(
        # with fewer samples than neurons the fits need no (p, p) scatter
        Xc.T @ Xc if Xc.shape[0] >= Xc.shape[1] else None,
        Xc.T @ Yc,
        float(np.sum(Yc * Yc)),
        X.shape[0],
        alpha,
        data=(Xc, Yc),
        keep=keep,
        means=(x_mean, y_mean),
    )


class ReducedRankRegressionCV(CommunicationSubspaceMixin, BaseEstimator):
    """Reduced-rank regression with the rank chosen by blocked cross-validation.

    The rank is the smallest whose mean cross-validated NSE is within one
    standard error of the best (Semedo's ``ModelSelect``). Folds are
    contiguous blocks of time.

    With a sparsity the rank and the sparsity are chosen together, on the
    sparse fits: every candidate rank gets the sparsity candidates on the
    same folds, and the one-SEM rule runs over the table of (rank,
    sparsity) cells ordered from the simplest model, the smallest rank
    first and within a rank the sparsest candidate first: the choice is the
    first cell whose mean loss is within one SEM (of the best cell's fold
    losses) of the best. The dense fits cannot see the rank where there are
    about as many source neurons as samples: every dense rank then predicts
    worse than the mean and the dense choice is rank 0, an empty model,
    while sparse fits of rank 1 or more predict (issue 47). Ranks are fitted
    in increasing order and stop after two in a row that do not lower the
    best mean loss of the table: the rule, which takes the smallest rank
    within one SEM, could not choose them.

    Parameters
    ----------
    ranks : iterable of int, default=(0, 1, ..., 10)
        Candidate ranks; those above ``min(n_source, n_target)`` are dropped.
    cv : int or cross-validation splitter, default=10
        An int means ``KFold(n_splits=cv, shuffle=False)`` (contiguous blocks),
        or contiguous blocks of whole trials when ``fit`` gets ``groups``.
    alpha : float, default=0.0
        Ridge penalty (see :class:`ReducedRankRegression`).
    sparsity : float, "cv" or sequence of float, default=0.0
        Group lasso on the source neurons (see
        :class:`ReducedRankRegression`). A number fixes it (the rank is then
        chosen on the sparse fits at that number); "cv" chooses it among
        ``SPARSITY_GRID`` (16 down to 0), a sequence among its values,
        together with the rank (see above). 0 (default) is the dense fit,
        unchanged.

    Attributes
    ----------
    rank_ : int
        Selected rank (with a sparsity: the joint choice).
    cv_results_ : dict
        ``rank``, ``fold_loss`` (n_ranks, n_folds), ``mean_loss``,
        ``sem_loss``, ``mean_score`` (1 - mean NSE), ``best_index``: the
        dense fits' table and choice. With a sparsity and more than one
        candidate cell also ``joint_rank`` (the ranks fitted),
        ``joint_fold_loss`` (n_ranks, n_candidates, n_folds),
        ``joint_mean_loss``, ``joint_sem_loss`` and ``joint_best_index``
        (rank index, candidate index); with a sparsity chosen by CV also
        the path at ``rank_``: ``sparsity`` (candidates, sparsest first),
        ``sparsity_fold_loss`` (n_candidates, n_folds),
        ``sparsity_mean_loss``, ``sparsity_sem_loss``,
        ``sparsity_mean_score`` and ``sparsity_best_index`` (the joint
        choice's candidate).
    sparsity_ : float
        The sparsity of the final fit (as given, or chosen by CV; 0 when
        ``rank_`` is 0).
    source_members_ : ndarray of int
        Source neurons with a non-zero weight in the final fit.
    coef_, intercept_, source_subspace_, target_subspace_, singular_values_
        Of the refit on all data at ``rank_`` (see :class:`ReducedRankRegression`).
    """

    def __init__(self, ranks=tuple(range(11)), cv=10, alpha=0.0, sparsity=0.0):
        self.ranks = ranks
        self.cv = cv
        self.alpha = alpha
        self.sparsity = sparsity

    def fit(self, X, y, groups=None):
        """Select the rank by cross-validation, then refit on all samples.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
        y : array-like of shape (n_samples, n_target) or (n_samples,)
        groups : array-like of shape (n_samples,), optional
            Trial id of every sample: an int ``cv`` then holds out contiguous
            blocks of whole trials. Taken from a ``trial`` coordinate along
            ``time`` when ``X`` or ``y`` is a labelled DataArray.

        Returns
        -------
        self
        """
        problem = make_problem(X, y, groups=groups, validate=self._validate_xy)
        check_alpha(self.alpha)
        sparsity = check_alpha(self.sparsity, name="sparsity", choose=True)
        check_folds(self.cv)
        ranks = candidate_ranks(self.ranks, problem.shape[1], problem.shape[2])
        self.cv_results_, self.rank_, B, b = cross_validate_rank(
            problem, ranks, self.cv, self.alpha
        )
        if not problem.in_memory:
            self.n_features_in_ = problem.shape[1]
        self.sparsity_ = 0.0
        if isinstance(sparsity, (str, tuple)) or sparsity > 0:
            B, b = self._sparse(problem, sparsity, ranks)
        self._set_baseline(B, b, self.rank_)
        self.source_members_ = np.flatnonzero(np.any(B != 0, axis=1))
        warn_fold_outliers(self.cv_results_)
        return self._finish(problem.y_1d)

    def _sparse(self, problem, sparsity, ranks):
        """Rank and sparsity chosen together on the folds; the refit on all samples."""
        if isinstance(sparsity, str):
            candidates = SPARSITY_GRID
        elif isinstance(sparsity, tuple):
            candidates = tuple(sorted(set(sparsity), reverse=True))  # sparsest first
        else:
            candidates = (float(sparsity),)
        alpha = self.alpha
        choose = len(candidates) > 1 or len(ranks) > 1
        if problem.in_memory:
            X, Y = problem.X, problem.Y
            if choose:
                splits = list(cv_splits(self.cv, X.shape[0], groups=problem.groups))
                folds = [
                    (_paths_on_arrays(X[train], Y[train], alpha), test) for train, test in splits
                ]

                def fold_losses(paths, test, rank):
                    coefs, icpts = paths.coefficients(rank, candidates)
                    return [
                        normalized_squared_error(Y[test], X[test] @ B + b)
                        for B, b in zip(coefs, icpts, strict=True)
                    ]

                rank, best = self._choose(ranks, candidates, folds, fold_losses)
            else:
                rank, best = ranks[0], 0
            (B,), (b,), _ = _sparse_on_arrays(X, Y, rank, [candidates[best]], alpha)
        else:
            total, fold_sums, (x_shift, y_shift) = problem.xy_fold_sums(problem.splits(self.cv))
            if choose:
                folds = [
                    (SparseRRRPaths.from_sums(total - excl, alpha), test)
                    for test, excl in fold_sums
                ]

                def fold_losses(paths, test, rank):
                    coefs, icpts = paths.coefficients(rank, candidates)
                    return [
                        sums_heldout_loss(test, B, c) for B, c in zip(coefs, icpts, strict=True)
                    ]

                rank, best = self._choose(ranks, candidates, folds, fold_losses)
            else:
                rank, best = ranks[0], 0
            (B,), (c,) = sparse_rrr_path_from_sums(total, rank, [candidates[best]], alpha)
            # back from the shifted basis: y - y_shift = (x - x_shift) B + c
            b = y_shift + c - x_shift @ B
        self.rank_ = int(rank)
        self.sparsity_ = float(candidates[best]) if rank > 0 else 0.0
        return B, b

    def _choose(self, ranks, candidates, folds, fold_losses):
        """The joint table, rank after rank, until the ranks stop helping; its one-SEM cell.

        A rank whose best mean held-out loss (over the candidates) is not
        below the best of the smaller ranks adds nothing the rule could
        choose: the rule takes the *smallest* rank within one SEM of the
        best. After ``_RANK_PATIENCE`` such ranks in a row the larger ones
        are not fitted (their fits are the slowest: subspace dimensions of
        noise converge slowly).
        """
        table, best_so_far, idle = [], np.inf, 0
        for rank in ranks:
            losses = [fold_losses(paths, test, rank) for paths, test in folds]
            table.append(losses)
            mean = np.mean(losses, axis=0)
            if np.nanmin(mean) < best_so_far:
                best_so_far, idle = float(np.nanmin(mean)), 0
            else:
                idle += 1
                if idle >= _RANK_PATIENCE:
                    break
        # (n_folds, n_ranks, n_candidates)
        fitted = ranks[: len(table)]
        return self._record(fitted, candidates, np.transpose(table, (1, 0, 2)))

    def _record(self, ranks, candidates, losses):
        """Store the joint table in ``cv_results_``; the one-SEM choice ``(rank, index)``.

        ``losses`` is (n_folds, n_ranks, n_candidates). The cells are ordered
        from the simplest model to the most complex, the rank first and the
        sparsity (sparsest first) within it, and the one-SEM rule takes the
        first cell within one SEM of the best (:func:`mics.core.one_sem_rule`).
        """
        fold_loss = np.asarray(losses, dtype=float).transpose(1, 2, 0)
        n_ranks, n_cand, n_folds = fold_loss.shape
        flat = summarize_cv(
            np.arange(n_ranks * n_cand), fold_loss.reshape(-1, n_folds), key="cell"
        )
        i_rank, best = divmod(int(flat["best_index"]), n_cand)
        self.cv_results_["joint_rank"] = np.asarray(ranks)
        self.cv_results_["joint_fold_loss"] = fold_loss
        self.cv_results_["joint_mean_loss"] = flat["mean_loss"].reshape(n_ranks, n_cand)
        self.cv_results_["joint_sem_loss"] = flat["sem_loss"].reshape(n_ranks, n_cand)
        self.cv_results_["joint_best_index"] = (i_rank, best)
        if n_cand > 1:
            # the sparsity path at the chosen rank, as without the joint table
            table = summarize_cv(candidates, fold_loss[i_rank], key="sparsity")
            self.cv_results_["sparsity"] = table.pop("sparsity")
            table["best_index"] = best
            for key, value in table.items():
                self.cv_results_[f"sparsity_{key}"] = value
        return ranks[i_rank], best


def candidate_ranks(ranks, n_source, n_target):
    """Sorted unique candidate ranks that the data can identify."""
    ranks = sorted({check_rank(r, np.inf, np.inf, name="each of ranks") for r in ranks})
    if not ranks:
        raise ValueError("ranks is empty: give at least one candidate rank.")
    kept = [r for r in ranks if r <= min(n_source, n_target)]
    if not kept:
        raise ValueError(
            f"No candidate rank is <= min(n_source, n_target) = {min(n_source, n_target)}."
        )
    return kept
