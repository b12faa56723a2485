"""Sparse channel patterns (issue 33): what the group lasso over neurons costs.

Issue 33's cost targets, each as a pair timed in one class so that the
ratio is read from one run:

- :class:`SparseFixedFit`: ``MICs(rank=3, n_channels=2, sparsity=8)``
  against the dense fixed fit ``MICs(rank=3, n_channels=2)`` on the same
  data (target: sparse <= 3x dense at T=20000, p=300, q=100, m=3).
  ``sparsity=8`` is the value ``MICs(sparsity="cv")`` chooses on the large
  data set here and the one ``results/sparse_members`` uses.
- :class:`SparsityPath`: the full path with cross-validation,
  ``MICs(sparsity="cv")`` with the default selection of rank and channels,
  against the dense default selection ``MICs()`` (target <= 3x).

Data: ``mics.simulate`` with a rank-3 baseline and two channels (seed 0),
the suite's two sizes (:data:`benchmarks.SIZES`).

Sparse reduced-rank regression (issue 47), at the two scales of the
reference (the berenslab sparse RRR of Kobak et al. 2021):

- :class:`SparseRRRPatchSeq`: Patch-seq scale, more genes than cells (80 x
  1313 x 80, rank 2), one ``ReducedRankRegression(sparsity=...)`` fit per
  penalty of the reference's elastic net (mixing 0.5, six weights), beside
  the reference's algorithm on scikit-learn's ``MultiTaskElasticNet``
  (:func:`peer_sparse_rrr`), the peer that runs anywhere.
- :class:`SparseRRRDemoCV`: the reference's demo scale (1213 x 1000 x 16):
  ``ReducedRankRegressionCV(ranks=(2,), cv=10, sparsity="cv")``, and the
  default ranks (rank and sparsity chosen together).

``studies/performance/sparse_rrr_speed.py`` times the reference itself
beside mics (when its code is given), at the same settings.
"""

from __future__ import annotations

import functools

import numpy as np

import mics
from benchmarks import SIZES, data, quiet, warm_up

#: The fixed group-lasso weight of the sparse fit (see the module docstring).
SPARSITY = 8.0


def _data(size):
    return data(**SIZES[size], rank=3, n_channels=2)


class SparseFixedFit:
    """``MICs(rank=3, n_channels=2, sparsity=8).fit`` beside the dense fixed fit.

    The dense fit is ``MICs(rank=3, n_channels=2).fit`` on the same data.
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (3, 10, 20.0)
    timeout = 180

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = _data(size)

    def _fit(self, sparsity):
        est = mics.MICs(rank=3, n_channels=2, sparsity=sparsity, random_state=0, verbose=0)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_dense(self, size):
        self._fit(0.0)

    def time_sparse(self, size):
        self._fit(SPARSITY)

    def track_n_iter_sparse(self, size):
        """ALS sweeps of the sparse fit (``n_iter_``): a change in convergence shows here."""
        return int(self._fit(SPARSITY).n_iter_)

    track_n_iter_sparse.unit = "sweeps"


class SparsityPath:
    """``MICs(sparsity="cv").fit`` beside the dense default selection ``MICs().fit``.

    Both select rank and channels on the same 10 folds; the sparse one then
    fits the sparsity path (0 to 32) on every fold at the selected sizes and
    chooses by the one-SEM rule (:mod:`mics.model.sparsity_path`). One
    process, one core (``n_jobs=1``), so the two are timed alike.
    """

    params = list(SIZES)
    param_names = ["size"]
    rounds = 1
    repeat = (1, 3, 60.0)
    number = 1
    timeout = 900

    def setup(self, size):
        warm_up()
        self.X, self.Y, self.Z = _data(size)

    def _fit(self, **params):
        est = mics.MICs(random_state=0, verbose=0, n_jobs=1, **params)
        with quiet():
            return est.fit(self.X, self.Y, self.Z)

    def time_default_selection(self, size):
        self._fit()

    def time_sparsity_cv(self, size):
        self._fit(sparsity="cv")

    def track_sparsity(self, size):
        """The chosen weight (``sparsity_``): a change of the path or its rule shows here."""
        return float(self._fit(sparsity="cv").sparsity_)

    track_sparsity.unit = "sparsity"


# ----------------------------------------------------------------------------- sparse RRR
#: The reference's elastic-net weights at Patch-seq scale (glmnet's ``lambda``
#: with mixing ``alpha = 0.5``; 1.5 keeps about 50 of 1313 genes, 0.2 about
#: 130), and the mixing.
PATCHSEQ_LAMBDAS = (0.2, 0.3, 0.5, 0.7, 1.0, 1.5)
PATCHSEQ_MIXING = 0.5


@functools.cache
def patchseq_like(seed=0, n=80, p=1313, q=80, rank=2, n_members=20, n_programs=10):
    """Patch-seq-like data with more genes than cells: ``(X, Y)``, standardised.

    Genes share a few expression programs (correlated columns) plus their
    own noise; the targets (electrophysiology) carry a rank-``rank`` signal
    from ``n_members`` genes, at about R^2 = 0.9 within the sample (a fit
    with p > n can find it only by selecting genes).
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_programs)) @ rng.standard_normal((n_programs, p)) * 0.5
    X += rng.standard_normal((n, p))
    W = np.zeros((p, rank))
    W[rng.choice(p, n_members, replace=False)] = rng.standard_normal((n_members, rank))
    S = X @ W
    V = np.linalg.qr(rng.standard_normal((q, rank)))[0]
    Y = 3 * (S / S.std(axis=0)) @ V.T + rng.standard_normal((n, q))
    return _standardised(X), _standardised(Y)


@functools.cache
def demo_like(seed=0, n=1213, p=1000, q=16, rank=2, n_members=25, gain=0.65, n_programs=20):
    """Data like the reference's demo (1213 cells, 1000 genes, 16 features): ``(X, Y)``.

    As :func:`patchseq_like`, with p close to n and a weaker signal (test
    R^2 about 0.25 for a sparse rank-2 fit): the dense fits of every rank
    predict worse than the mean, so the dense rank selection sees nothing.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, n_programs)) @ rng.standard_normal((n_programs, p)) * 0.4
    X += rng.standard_normal((n, p))
    W = np.zeros((p, rank))
    W[rng.choice(p, n_members, replace=False)] = rng.standard_normal((n_members, rank))
    S = X @ W
    Y = gain * _standardised(S) @ rng.standard_normal((rank, q)) + rng.standard_normal((n, q))
    return _standardised(X), _standardised(Y)


def _standardised(A):
    return (A - A.mean(axis=0)) / A.std(axis=0)


def mics_settings(X, Y, lam, mixing):
    """``ReducedRankRegression``'s ``alpha`` and ``sparsity`` for glmnet's ``lambda`` and mixing.

    glmnet minimises ``||Y - X B||^2 / (2 n) + lambda ((1 - mixing) ||B||^2 / 2
    + mixing sum_i ||B[i]||)``; times ``2 n`` this is the loss of
    :func:`mics.core.fit_sparse_rrr` with ``alpha = n lambda (1 - mixing)``
    and group weight ``2 n lambda mixing``, which ``sparsity`` expresses in
    standard errors (:func:`mics.core.sparse_rrr_penalty`).
    """
    n, q = Y.shape
    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    per_unit = mics.core.sparse_rrr_penalty(
        np.diag(np.einsum("ti,ti->i", Xc, Xc)), float(np.sum(Yc * Yc)), n, q, 1.0
    )
    return n * lam * (1 - mixing), 2 * n * lam * mixing / per_unit


def peer_sparse_rrr(X, Y, rank, lam, mixing, max_iter=100, tol=1e-6):
    """The reference's algorithm on scikit-learn: ``(W, V)``.

    The alternation of Kobak et al. (2021) as their code runs it: ``V`` from
    the partial-least-squares directions, then in turn the elastic net
    ``W`` of ``Y V`` on ``X`` (``MultiTaskElasticNet``, glmnet's ``lambda``
    as its ``alpha``) and ``V`` by Procrustes, until the relative loss
    changes by less than ``tol``. Data centred, no intercept.
    """
    from sklearn.linear_model import MultiTaskElasticNet

    Xc, Yc = X - X.mean(axis=0), Y - Y.mean(axis=0)
    V = np.linalg.svd(Xc.T @ Yc, full_matrices=False)[2][:rank].T
    net = MultiTaskElasticNet(alpha=lam, l1_ratio=mixing, fit_intercept=False, warm_start=True)
    total, last = float(np.sum(Yc * Yc)), np.inf
    for _ in range(max_iter):
        W = net.fit(Xc, Yc @ V).coef_.T
        if not np.any(W):
            return W, V
        P, _, Qt = np.linalg.svd(Yc.T @ (Xc @ W), full_matrices=False)
        V = P @ Qt
        loss = float(np.sum((Yc - Xc @ W @ V.T) ** 2)) / total
        if abs(loss - last) < tol:
            break
        last = loss
    return W, V


class SparseRRRPatchSeq:
    """Six sparse RRR fits at Patch-seq scale (80 x 1313 x 80, rank 2): mics and the peer.

    ``time_mics``: ``ReducedRankRegression(rank=2, alpha, sparsity).fit`` at
    each of :data:`PATCHSEQ_LAMBDAS` (mixing 0.5, :func:`mics_settings`);
    ``time_peer``: :func:`peer_sparse_rrr` at the same weights. One BLAS
    thread in the mics fits (they limit themselves); the peer uses its default.
    """

    rounds = 1
    repeat = (3, 10, 30.0)
    number = 1
    timeout = 600

    def setup(self):
        warm_up()
        self.X, self.Y = patchseq_like()
        self.settings = [
            mics_settings(self.X, self.Y, lam, PATCHSEQ_MIXING) for lam in PATCHSEQ_LAMBDAS
        ]
        # compile the kernel outside the timing
        mics.ReducedRankRegression(rank=2, alpha=1.0, sparsity=1.0).fit(self.X[:, :50], self.Y)

    def time_mics(self):
        for alpha, sparsity in self.settings:
            mics.ReducedRankRegression(rank=2, alpha=alpha, sparsity=sparsity).fit(self.X, self.Y)

    def time_peer(self):
        for lam in PATCHSEQ_LAMBDAS:
            peer_sparse_rrr(self.X, self.Y, 2, lam, PATCHSEQ_MIXING)


class SparseRRRDemoCV:
    """Cross-validated sparse RRR at the reference's demo scale (1213 x 1000 x 16).

    ``time_rank2``: ``ReducedRankRegressionCV(ranks=(2,), cv=10,
    sparsity="cv").fit`` (the reference's cross-validation fixes rank 2);
    ``time_default_ranks``: the default ranks 0-10, chosen together with
    the sparsity; ``track_rank``: the rank that choice makes.
    """

    rounds = 1
    repeat = (1, 3, 120.0)
    number = 1
    timeout = 1200

    def setup(self):
        warm_up()
        self.X, self.Y = demo_like()
        mics.ReducedRankRegression(rank=2, sparsity=1.0).fit(self.X[:, :50], self.Y)

    def _fit(self, **params):
        return mics.ReducedRankRegressionCV(cv=10, sparsity="cv", **params).fit(self.X, self.Y)

    def time_rank2(self):
        self._fit(ranks=(2,))

    def time_default_ranks(self):
        self._fit()

    def track_rank(self):
        """The rank chosen with the default ranks (``rank_``): 0 would be the empty model."""
        return int(self._fit().rank_)

    track_rank.unit = "rank"
