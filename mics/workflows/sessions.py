"""Several recordings: fits per session and fits from pooled moments."""

from __future__ import annotations

__all__ = ["fit_each_session"]


def fit_each_session(estimator, sessions, *, n_jobs=None, verbose=1):
    """Fit a clone of ``estimator`` to every session, sessions in parallel.

    Parameters
    ----------
    estimator : MICs (or any estimator whose ``fit`` takes ``(X, y, Z)``)
    sessions : sequence of (X, y, Z)
        NumPy, Dask or xarray inputs per session.
    n_jobs : int, optional
        Sessions fitted at once (joblib; under ``joblib.parallel_backend("dask")``
        on the cluster). Each fit keeps the estimator's own ``n_jobs``.
    verbose : int

    Returns
    -------
    list of fitted estimators
        In the order of ``sessions``; each clone has the estimator's
        parameters, so the same ``random_state`` seeds every session alike.
    """
    from joblib import Parallel, delayed
    from sklearn.base import clone
    from tqdm import tqdm

    sessions = [tuple(s) for s in sessions]
    for i, s in enumerate(sessions):
        if len(s) != 3:
            raise ValueError(f"session {i} must be an (X, y, Z) triple, got {len(s)} items.")

    def _fit(X, y, Z):
        return clone(estimator).set_params(verbose=0).fit(X, y, Z)

    jobs = (delayed(_fit)(*s) for s in sessions)
    results = Parallel(n_jobs=n_jobs, prefer="threads", return_as="generator")(jobs)
    return list(tqdm(results, total=len(sessions), desc="sessions", disable=not verbose))
