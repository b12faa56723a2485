"""The ``MICs`` estimator: a thin scikit-learn class over the functional core."""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from mics._labels import unwrap, wrap_matrix, wrap_patterns, wrap_timeseries
from mics._linalg import single_blas_thread
from mics._validation import (
    check_count,
    check_folds,
    check_modulator,
    check_population,
    check_rank,
)
from mics.estimators import (
    ReducedRankRegression,
    ReducedRankRegressionCV,
    _check_alpha,
    _CommunicationSubspaceMixin,
    _validate_xy,
)
from mics.modulation import DataOperator, MomentOperator, fit_mic_model
from mics.moments import compute_moments
from mics.scoring import normalized_squared_error
from mics.units import InputScales, restore_fit

__all__ = ["MICs"]


def _is_dataarray(a):
    return type(a).__name__ == "DataArray"


def _n_time(a):
    """Samples of an input: its ``time`` dimension when labelled, else its rows."""
    if _is_dataarray(a) and "time" in a.dims:
        return a.sizes["time"]
    return len(a)


def _centred(a, name, session):
    """A session's array minus its own column means (finite values checked)."""
    a = np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"session {session}: {name} contains NaN or infinity.")
    if a.shape[0] < 2:
        raise ValueError(f"session {session}: {name} has fewer than 2 samples.")
    return a - a.mean(axis=0)


class MICs(_CommunicationSubspaceMixin, BaseEstimator):
    """Multiplicative interaction channels: a modulator gating a communication subspace.

    The model (see ``docs/model.md``)::

        y = mu + B^T x + D^T z + sum_k lambda_k (c_k . z)(a_k . x) b_k + noise

    ``B`` (rank ``r``) is the baseline communication subspace, ``D`` the
    additive effect of the modulator on the target, and each channel
    ``(a_k, b_k, c_k)`` is a source pattern whose influence on a target
    pattern is gated by a modulator pattern. Source, modulator and target
    are centred with training means, so ``B`` is the modulator-averaged
    interaction.

    Parameters
    ----------
    rank : int or None, default=None
        Baseline rank ``r``; None selects it by blocked cross-validation.
    n_channels : int or None, default=None
        Number of channels ``K``; None selects it (0 means no modulation found).
    alpha : float, default=0.05
        Ridge penalty on the baseline, relative to the data: ``alpha`` times
        the mean per-sample source variance times ``p + q`` (the parameters
        of one communication dimension). It grows with dimension, where
        shrinkage pays, not with the number of samples. Both penalties are
        defined on the standardised inputs (see Notes), so they do not
        depend on the units of X, Y or Z.
    alpha_channels : float or None, default=0.25
        Ridge penalty on each channel factor, relative in the same way:
        times the mean per-sample interaction variance times ``p + q + m``.
        None uses ``alpha``. The defaults were chosen on simulations with
        T = 300-500 samples for p = 150, q = 100 (see ``benchmarks/recovery.py``);
        lower them when samples are plentiful.
    n_init : int, default=3
        Random restarts in addition to the deterministic HOSVD start.
    max_iter : int, default=200
        Maximum alternating sweeps per stage.
    tol : float, default=1e-7
        Relative loss decrease that ends a stage.
    cv : int or splitter, default=10
        Folds for selection; an int means contiguous blocks (of whole trials
        when ``fit`` gets ``groups`` or a labelled input has a ``trial``
        coordinate).
    max_rank : int, default=10
        Largest baseline rank tried when ``rank`` is None.
    max_channels : int, default=4
        Largest number of channels tried when ``n_channels`` is None.
    channel_search : {"sequential", "grid"}, default="sequential"
        How the channel counts are scored when ``n_channels`` is None.
        "grid" cross-validates every ``K = 0 .. max_channels``.
        "sequential" scores K = 0 and 1, then each next K only while the
        last one lowered the mean held-out loss below that of every smaller
        K: counts past the first that overfits are not fitted (on data
        without modulation, only K = 1 is). The one-SEM choice is then made
        among the counts scored, and ``cv_results_`` holds only those. On
        336 simulated data sets it selected what the grid selects on every
        one (``results/speed/channel_search/``); choose "grid" for the
        whole curve, and for a confirmatory :func:`mics.test_modulation`:
        where K = 1 predicts worse than K = 0 but K = 2 better, the
        sequential search never scores K = 2 and the test statistic misses
        it (11 of 147 tests of the Park study,
        ``results/park2024/channel_search.md``).
    gap : int, default=0
        Samples left out between training and test blocks during selection.
    solver : {"auto", "moments", "data"}, default="auto"
        "moments" fits from sufficient statistics (one pass over the data,
        then sweeps whose cost is independent of the number of samples);
        "data" works on the centred data directly, with memory linear in the
        data and the parameters (a third population as modulator). "auto"
        estimates the cost and memory of both (:mod:`mics.solver_cost`) and
        takes the moments when their ``((p+1)(m+1))^2`` entries fit in
        ``memory_limit`` and they cost less: when ``m^2`` is small against
        the number of samples.
    memory_limit : float, default=2e9
        Bytes the interaction moments may take before "auto" switches to "data".
    n_jobs : int or None, default=None
        Parallel jobs for selection (joblib; works under a Dask backend).
    verbose : int, default=1
        0 silences progress bars.
    random_state : int, RandomState or None, default=None
        Seeds the random restarts; fixes every fit.

    Attributes
    ----------
    rank_ : int
    n_channels_ : int
    coef_ : ndarray of shape (n_target, n_source)
        Baseline communication matrix ``B^T``.
    intercept_ : ndarray of shape (n_target,)
    modulator_coef_ : ndarray of shape (n_target, n_modulators)
        Additive modulator effect ``D^T``.
    source_subspace_ : ndarray of shape (n_source, rank_)
    target_subspace_ : ndarray of shape (n_target, rank_)
    channel_weights_ : ndarray of shape (n_channels_,)
        ``lambda_k``, positive, descending.
    source_patterns_ : ndarray of shape (n_source, n_channels_)
    target_patterns_ : ndarray of shape (n_target, n_channels_)
    modulator_patterns_ : ndarray of shape (n_modulators, n_channels_)
        Unit-norm columns; the largest-|.| entries of source and target
        patterns are positive (the channel's sign lives in the modulator pattern).
    source_mean_, modulator_mean_ : ndarray
        Training means used for centring.
    source_covariance_ : ndarray of shape (n_source, n_source)
    loss_history_ : ndarray
        Penalised loss after each sweep; never increases.
    n_iter_ : int
    converged_ : bool
    solver_ : str
        "moments" or "data".
    cv_results_ : dict
        When selection ran: per-candidate fold losses (NSE) for the rank and
        channel stages (the channel counts scored under ``n_channels``).
    source_scale_, target_scale_ : float
        Root mean per-neuron standard deviation of X and of Y (training data).
    modulator_scale_ : ndarray of shape (n_modulators,)
        Standard deviation of each modulator column.

    Notes
    -----
    **Units.** The fit is done on standardised inputs and every attribute is
    mapped back to the user's units (``mics.units``): X and Y are each
    divided by *one* scalar (``source_scale_``, ``target_scale_``), which
    keeps the relative variances of the neurons that reduced-rank regression
    relies on; each modulator column is divided by *its own* standard
    deviation (``modulator_scale_``), so a modulator set mixing running speed
    in cm/s and pupil size in pixels is not weighed by its units. Hence
    multiplying X, Y or Z (or one column of Z) by a positive constant leaves
    the selected rank and channel count, the source and target patterns, the
    cross-validated losses and the predictions (in Y's units) unchanged;
    ``coef_`` scales by ``s_Y / s_X``, ``modulator_coef_`` column ``a`` by
    ``s_Y / s_Z[a]``, the channel tensor along the modulator mode by
    ``s_Y / (s_X s_Z[a])`` (the modulator patterns are renormalised
    accordingly, so they change direction only under per-column rescaling
    of Z). ``loss_history_`` is in squared units of Y.
    """

    # Set on private clones by mics.inference: a null statistic of the
    # modulation test needs cv_results_ only, so the selection returns before
    # the fit on all samples (after all of its random draws, so the selection
    # itself is unchanged). Not a parameter: clone() resets it.
    _cv_only = False

    def __init__(
        self,
        rank=None,
        n_channels=None,
        *,
        alpha=0.05,
        alpha_channels=0.25,
        n_init=3,
        max_iter=200,
        tol=1e-7,
        cv=10,
        max_rank=10,
        max_channels=4,
        channel_search="sequential",
        gap=0,
        solver="auto",
        memory_limit=2e9,
        n_jobs=None,
        verbose=1,
        random_state=None,
    ):
        self.rank = rank
        self.n_channels = n_channels
        self.alpha = alpha
        self.alpha_channels = alpha_channels
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.cv = cv
        self.max_rank = max_rank
        self.max_channels = max_channels
        self.channel_search = channel_search
        self.gap = gap
        self.solver = solver
        self.memory_limit = memory_limit
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, Z=None, groups=None):
        """Fit the baseline, the additive modulator effect and the channels.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
            Source population activity.
        y : array-like of shape (n_samples, n_target) or (n_samples,)
            Target population activity.
        Z : array-like of shape (n_samples, n_modulators) or (n_samples,), optional
            Modulator (running speed, pupil, another population). Without it
            the model is a reduced-rank regression.
        groups : array-like of shape (n_samples,), optional
            Trial id of every sample (each trial's samples contiguous): the
            selection folds are then contiguous blocks of whole trials. Taken
            from a ``trial`` coordinate along ``time`` of a labelled input
            when not given.

        Returns
        -------
        self
        """
        _check_alpha(self.alpha)
        if self.alpha_channels is not None:
            _check_alpha(self.alpha_channels)
        # Labelled inputs are unwrapped here; the core sees (time, neuron) arrays.
        X, ix = unwrap(X, "X")
        y, iy = unwrap(y, "Y")
        Z, iz = unwrap(Z, "Z") if Z is not None else (None, None)
        self._labels = (ix, iy, iz) if any(i is not None for i in (ix, iy, iz)) else None
        from mics.chunked import any_chunked
        from mics.trials import groups_from_labels

        if any_chunked(X, y, Z):
            return self._fit_chunked(X, y, Z, groups, ix, iy, iz)
        if Z is None:
            self._fit_without_modulator(X, y, groups, ix, iy)
            return self._label_outputs()
        X, Y, y_1d = _validate_xy(self, X, y)
        groups = groups_from_labels(groups, ix, iy, iz, n_samples=X.shape[0])
        Z = check_modulator(Z, X.shape[0])  # also checks the shared time axis
        self._check_params(X.shape[1], Y.shape[1], Z.shape[1])
        rng = check_random_state(self.random_state)
        self.solver_ = self._choose_solver(X.shape[0], X.shape[1], Z.shape[1], Y.shape[1])
        # Fit in standard units so that penalties (and hence every selection,
        # pattern and p-value) do not depend on the units of X, Y or Z.
        fixed = self.rank is not None and self.n_channels is not None
        if fixed and self.solver_ == "moments":
            # One pass over the data as given: the scales and the standardised
            # moments follow from its moments exactly, with no variance pass
            # and no standardised copies (about 25 ms and 64 MB at T = 20000,
            # p = 300, q = 100, m = 3).
            self._fit_standardised_moments(compute_moments(X, Y, Z), None, rng, y_1d)
            return self._label_outputs()
        scales = InputScales.from_data(X, Y, Z)
        X, Y, Z = scales.standardize(X, Y, Z)

        if not fixed:
            from mics.selection import select_mic_model

            rank, n_channels, self.cv_results_, raw = select_mic_model(
                self, X, Y, Z, rng, groups=groups
            )
            if self._cv_only:
                return self
        else:
            rank, n_channels = int(self.rank), int(self.n_channels)
            raw = compute_moments(X, Y, Z, interaction=False)  # the data path's linear moments
        cm = raw.centered()
        op = MomentOperator(cm) if self.solver_ == "moments" else DataOperator(cm, X, Y, Z)
        self._final_fit(op, cm, rank, n_channels, scales, rng, y_1d)
        return self._label_outputs()

    def _final_fit(self, op, cm, rank, n_channels, scales, rng, y_1d):
        """The fit on all samples (standard units), stored in the user's units."""
        result = fit_mic_model(
            op,
            rank,
            n_channels,
            **self._penalties(op),
            n_init=self.n_init,
            max_iter=self.max_iter,
            tol=self.tol,
            random_state=rng.randint(np.iinfo(np.int32).max),
        )
        self._set_scales(scales)
        cm = scales.restore_moments(cm, interaction=False)
        with single_blas_thread():  # small SVDs, see fit_mic_model
            self._store(restore_fit(result, scales), cm, rank)
        self._finish(y_1d)

    def fit_sessions(self, sessions, groups=None):
        """Fit one model to several recordings, each centred on its own means.

        Every session's source, target and modulator have their session means
        subtracted (lazily for Dask inputs), so offsets between sessions
        (baseline drift of raw fluorescence, a different mean arousal) are
        not mistaken for covariance; the centred sessions are then fitted as
        one recording, selection included (contiguous folds of the sessions
        in their given order; pass ``groups`` for whole trials). The result
        equals :meth:`fit` on the concatenation of the centred sessions.

        Pooling assumes the columns are the same variables in every session
        (registered neurons in one order, the same modulators in the same
        units) and the same communication and channels throughout (see
        :func:`mics.parallel.moments_from_sessions`). To fit each session on
        its own, use :func:`mics.parallel.fit_each_session`.

        Parameters
        ----------
        sessions : sequence of (X, y, Z)
            Per session: arrays of shape (n_s, p), (n_s, q) or (n_s,), and
            (n_s, m) or (n_s,); NumPy, Dask or xarray (labelled inputs need
            the same neuron ids in every session).
        groups : array-like of shape (sum of n_s,), optional
            Trial ids of the concatenated samples (unique across sessions).

        Returns
        -------
        self
            Fitted on the centred data: ``predict`` expects inputs centred
            on their own session's means. ``session_lengths_`` holds n_s.
        """
        from mics.chunked import any_chunked

        sessions = [tuple(s) for s in sessions]
        if not sessions:
            raise ValueError("no sessions given.")
        for i, s in enumerate(sessions):
            if len(s) != 3 or any(a is None for a in s):
                raise ValueError(f"session {i} must be an (X, y, Z) triple of arrays.")
        parts = list(zip(*sessions, strict=True))
        lengths = []
        for i, s in enumerate(sessions):
            nx, ny, nz = (_n_time(a) for a in s)
            if len({nx, ny, nz}) > 1:
                raise ValueError(
                    f"session {i}: X, y and Z have {nx}, {ny} and {nz} samples; "
                    "they must share the time axis."
                )
            lengths.append(nx)
        if any(any_chunked(*s) for s in sessions):
            import dask.array as da

            from mics.chunked import as_dask

            joined = []
            for arrays, name in zip(parts, ("X", "y", "Z"), strict=True):
                cols = [as_dask(unwrap(a, name)[0], name) for a in arrays]
                cat = da.concatenate([a - a.mean(axis=0) for a in cols], axis=0)
                one_d = all(getattr(a, "ndim", 2) == 1 for a in arrays)
                joined.append(cat[:, 0] if one_d else cat)
        elif all(_is_dataarray(a) for a in parts[0]):
            import xarray as xr

            joined = [
                xr.concat([a - a.mean("time") for a in arrays], dim="time", join="exact")
                for arrays in parts
            ]
        else:
            joined = [
                np.concatenate([_centred(a, name, i) for i, a in enumerate(arrays)])
                for arrays, name in zip(parts, ("X", "y", "Z"), strict=True)
            ]
        self.fit(*joined, groups=groups)
        self.session_lengths_ = np.asarray(lengths)
        return self

    def _fit_chunked(self, X, y, Z, groups, ix, iy, iz):
        """Dask (or Dask-backed xarray) inputs: selection and fit from block moments.

        The fold moments come from one pass over the data on the active Dask
        scheduler (:func:`mics.chunked.fold_moments`); nothing the size of
        the recording is loaded here.
        """
        from mics.chunked import fold_moments, lazy_inputs
        from mics.trials import cv_splits, groups_from_labels

        if Z is None:
            raise ValueError(
                "chunked (Dask) inputs need a modulator Z; without one the model is a "
                "reduced-rank regression: ReducedRankRegressionCV accepts Dask arrays."
            )
        if y is None:
            raise ValueError("MICs requires y to be passed, but the target y is None.")
        X, Y, Z, y_1d = lazy_inputs(X, y, Z)
        n, p, q, m = X.shape[0], X.shape[1], Y.shape[1], Z.shape[1]
        if n < 2:
            raise ValueError(f"at least 2 samples are needed, got {n}.")
        self._check_params(p, q, m)
        self._check_chunked_solver(p, q, m)
        groups = groups_from_labels(groups, ix, iy, iz, n_samples=n)
        splits = None
        if self.rank is None or self.n_channels is None:
            splits = cv_splits(self.cv, n, gap=self.gap, groups=groups)
        total, folds = fold_moments(X, Y, Z, splits)
        self._fit_raw_moments(total, folds, y_1d)
        return self._label_outputs()

    def _check_chunked_solver(self, p, q, m):
        from mics.moments import moment_nbytes

        if self.solver == "data":
            raise ValueError(
                "solver='data' needs the data in memory; chunked (Dask) inputs are fitted "
                "from their moments (solver='moments' or 'auto')."
            )
        need = moment_nbytes(p, m, q)
        if self.solver == "auto" and need > self.memory_limit:
            raise ValueError(
                f"the interaction moments of p={p}, m={m} take {need / 1e9:.1f} GB, more than "
                f"memory_limit={self.memory_limit:.3g} bytes, and chunked inputs are fitted "
                "from moments only: raise memory_limit, or load the data (solver='data')."
            )
        self.solver_ = "moments"

    def fit_moments(self, moments, y_1d=False):
        """Fit from raw moments alone; the result is a full estimator.

        Parameters
        ----------
        moments : RawMoments or sequence of RawMoments
            From :func:`mics.moments.compute_moments` or
            :func:`mics.parallel.moments_from_dask` (``interaction=True``).
            One set of moments fits fixed ``rank`` and ``n_channels``. A
            sequence holds the moments of consecutive blocks of the
            recording (time blocks, trials, sessions) accumulated around the
            same shifts: they are summed for the fit, and with ``rank`` or
            ``n_channels`` None each block is held out in turn to select
            them (leave-one-block-out cross-validation, the one-SEM rule).
        y_1d : bool, default=False
            Predict a 1-D target (the moments' target has one column).

        Returns
        -------
        self
            Fitted as by :meth:`fit` on the data the moments summarise
            (predict, score, decompose, plotting and saving all work).
        """
        from mics.moments import RawMoments, check_interaction

        blocks = [moments] if isinstance(moments, RawMoments) else moments
        if not isinstance(blocks, (list, tuple)):
            blocks = [blocks]
        if not blocks or not all(isinstance(b, RawMoments) for b in blocks):
            raise TypeError(
                "moments must be RawMoments (interaction=True) or a list of them, got "
                f"{type(moments).__name__}; linear moments (interaction=False) cannot fit "
                "channels."
            )
        total = blocks[0]
        for b in blocks[1:]:
            total = total + b
        check_interaction(total)
        p, m, q = total.G.shape[0] - 1, total.G.shape[1] - 1, total.Gy.shape[2]
        self._check_params(p, q, m)
        folds = None
        if self.rank is None or self.n_channels is None:
            if len(blocks) < 2:
                raise ValueError(
                    "selecting rank or n_channels needs the moments of at least two blocks "
                    "(each is held out in turn); pass a list of block moments or fix both."
                )
            folds = [(None, None, b, b) for b in blocks]
        self.solver_ = "moments"
        self._labels = None
        self._fit_raw_moments(total, folds, bool(y_1d))
        return self

    def _fit_raw_moments(self, total, folds, y_1d):
        """Select (when folds are given) and fit from raw moments in the user's units.

        Checks the moments and sets the input attributes, then
        :meth:`_fit_standardised_moments`.
        """
        p, q = total.G.shape[0] - 1, total.Gy.shape[2]
        if total.n < 2:
            raise ValueError(f"at least 2 samples are needed, got {total.n}.")
        if y_1d and q != 1:
            raise ValueError(f"y_1d needs a single target column, the moments have {q}.")
        self.n_features_in_ = p
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self._fit_standardised_moments(
            total, folds, check_random_state(self.random_state), y_1d
        )

    def _fit_standardised_moments(self, total, folds, rng, y_1d):
        """Scales from raw moments, every moment mapped to standard units, then select and fit.

        Selects when ``folds`` are given (fold moments around ``total``'s
        shifts). The scales need only the diagonals of the raw moments
        (:meth:`InputScales.from_raw_moments`), and the random draws follow
        those of :meth:`fit`, so the fit equals ``fit`` on the data to
        rounding.
        """
        from mics.selection import select_from_moments

        self.solver_ = "moments"
        scales = InputScales.from_raw_moments(total)
        standard = scales.standardize_raw_moments
        total = standard(total)
        if folds is not None:
            # a fold without a gap excludes exactly its held-out block: scale it once
            folds = [
                (tr, te, st := standard(t), st if e is t else standard(e))
                for tr, te, t, e in folds
            ]
            rank, n_channels, self.cv_results_ = select_from_moments(self, total, folds, rng)
            if self._cv_only:
                return self
        else:
            rank, n_channels = int(self.rank), int(self.n_channels)
        cm = total.centered()
        self._final_fit(MomentOperator(cm), cm, rank, n_channels, scales, rng, y_1d)
        return self

    def _label_outputs(self):
        """Re-wrap patterns and coefficients with the inputs' neuron ids."""
        if self._labels is None:
            return self
        ix, iy, iz = self._labels
        self.source_patterns_ = wrap_patterns(self.source_patterns_, ix)
        self.target_patterns_ = wrap_patterns(self.target_patterns_, iy)
        self.source_subspace_ = wrap_patterns(self.source_subspace_, ix, "dimension")
        self.target_subspace_ = wrap_patterns(self.target_subspace_, iy, "dimension")
        if self.modulator_mean_.size:
            self.modulator_patterns_ = wrap_patterns(self.modulator_patterns_, iz)
            self.modulator_coef_ = wrap_matrix(self.modulator_coef_, iy, iz)
        return self

    def _array(self, name):
        """A fitted attribute as a plain array (labelled ones are DataArrays)."""
        return np.asarray(getattr(self, name))

    def _unwrap_like_fit(self, data, role):
        """Unwrap a predict-time input and put its neurons in the fitted order."""
        arr, info = unwrap(data, role)
        labels = getattr(self, "_labels", None)
        fitted = None if labels is None else labels[{"X": 0, "Z": 2}[role]]
        if info is not None and fitted is not None and info.feature_dim == fitted.feature_dim:
            ids = list(info.features)
            if ids != list(fitted.features):
                missing = set(fitted.features) - set(ids)
                if missing:
                    raise ValueError(
                        f"{role} lacks {len(missing)} {fitted.feature_dim}(s) seen in fit, "
                        f"e.g. {sorted(missing, key=str)[:3]}."
                    )
                arr = np.asarray(arr)[:, [ids.index(f) for f in fitted.features]]
        return arr, info

    def _penalties(self, op):
        # Per-sample variance times the number of parameters a component
        # carries: the penalty grows with dimension (where shrinkage pays, few
        # samples per parameter) but not with the number of samples, so the
        # fit stays consistent as recordings get longer.
        alpha_W = self.alpha if self.alpha_channels is None else self.alpha_channels
        x_var = np.trace(op.Sxx) / (op.p * op.n)
        return {
            "alpha_B": self.alpha * x_var * (op.p + op.q),
            "alpha_W": alpha_W * op.interaction_scale / op.n * (op.p + op.q + op.m),
        }

    def _fit_without_modulator(self, X, y, groups=None, ix=None, iy=None):
        """Without a modulator the model is a reduced-rank regression."""
        from mics.trials import groups_from_labels

        X, Y, y_1d = _validate_xy(self, X, y)
        check_count(self.max_rank, "max_rank", 0)
        check_folds(self.cv)
        groups = groups_from_labels(groups, ix, iy, n_samples=X.shape[0])
        p, q = X.shape[1], Y.shape[1]
        if self.rank is None:
            inner = ReducedRankRegressionCV(ranks=range(self.max_rank + 1), cv=self.cv)
            inner.fit(X, Y, groups=groups)
            # also under the keys of a fit with a modulator ("rank_mean_loss",
            # ...), so code reading either kind of fit needs no special case
            from mics.selection import _prefixed

            self.cv_results_ = {**inner.cv_results_, **_prefixed(inner.cv_results_, "rank")}
            rank = inner.rank_
        else:
            rank = check_rank(self.rank, p, q)
            inner = ReducedRankRegression(rank=rank).fit(X, Y)
        self.rank_ = int(rank)
        self.n_channels_ = 0
        self.solver_ = "moments"
        self.source_mean_ = X.mean(axis=0)
        self.modulator_mean_ = np.zeros(0)
        self.source_covariance_ = np.atleast_2d(np.cov(X, rowvar=False))
        self._set_baseline(inner.coef_.T, inner.intercept_, self.rank_)
        self.modulator_coef_ = np.zeros((q, 0))
        self._set_channels(np.zeros(0), np.zeros((p, 0)), np.zeros((q, 0)), np.zeros((0, 0)))
        self.loss_history_ = np.array([])
        # closed form: one "iteration" (scikit-learn expects n_iter_ >= 1)
        self.n_iter_ = 1
        self.converged_ = True
        return self._finish(y_1d)

    def _set_scales(self, scales):
        self.source_scale_ = scales.source
        self.target_scale_ = scales.target
        self.modulator_scale_ = scales.modulator

    def _set_channels(self, w, A, Bm, C):
        self.channel_weights_ = w
        self.source_patterns_ = A
        self.target_patterns_ = Bm
        self.modulator_patterns_ = C

    def _store(self, result, cm, rank):
        self.rank_ = int(rank)
        self.n_channels_ = int(result.weights.size)
        self.source_mean_ = cm.x_mean
        self.modulator_mean_ = cm.z_mean
        self.source_covariance_ = cm.Sxx / max(cm.n - 1, 1)
        B, D = result.coef, result.modulator_coef
        W_mean = np.einsum(
            "k,ik,ia,ak->k",
            result.weights,
            result.source_patterns,
            cm.phi_mean,
            result.modulator_patterns,
        )
        intercept = cm.y_mean - cm.x_mean @ B - cm.z_mean @ D - result.target_patterns @ W_mean
        self._set_baseline(B, intercept, self.rank_)
        self.modulator_coef_ = D.T
        self._set_channels(
            result.weights,
            result.source_patterns,
            result.target_patterns,
            result.modulator_patterns,
        )
        self.loss_history_ = result.loss_history
        self.baseline_loss_ = result.baseline_loss
        self.n_iter_ = result.n_iter
        self.converged_ = result.converged

    def _check_params(self, p, q, m):
        if self.rank is not None:
            check_rank(self.rank, p, q)
        if self.n_channels is not None:
            K = self.n_channels
            if not isinstance(K, numbers.Integral) or isinstance(K, bool) or K < 0:
                raise ValueError(f"n_channels must be a non-negative integer, got {K!r}.")
            limit = min(p * q, p * m, q * m)
            if limit < K:
                raise ValueError(
                    f"n_channels={K} cannot be identified: a (source x target x modulator) "
                    f"= ({p} x {q} x {m}) tensor has CP rank at most "
                    f"min(p*q, p*m, q*m) = {limit}."
                )
            if m == 1 and K > 1:
                warnings.warn(
                    f"With a single modulator, {K} channels share one gate: they span a "
                    "subspace but individual channels are defined only up to rotation.",
                    UserWarning,
                    stacklevel=3,
                )
        check_count(self.n_init, "n_init", 0)
        check_count(self.max_iter, "max_iter", 1)
        check_count(self.max_rank, "max_rank", 0)
        check_count(self.max_channels, "max_channels", 0)
        check_count(self.gap, "gap", 0)
        check_folds(self.cv)
        tol = self.tol
        if not isinstance(tol, numbers.Real) or isinstance(tol, bool) or not 0 <= tol < np.inf:
            raise ValueError(f"tol must be a non-negative finite number, got {tol!r}.")
        limit = self.memory_limit
        if not isinstance(limit, numbers.Real) or isinstance(limit, bool) or not limit > 0:
            raise ValueError(f"memory_limit must be a positive number of bytes, got {limit!r}.")
        if self.channel_search not in ("sequential", "grid"):
            raise ValueError(
                f"channel_search must be 'sequential' or 'grid', got {self.channel_search!r}."
            )
        if self.solver not in ("auto", "moments", "data"):
            raise ValueError(f"solver must be 'auto', 'moments' or 'data', got {self.solver!r}.")

    def _choose_solver(self, n, p, m, q):
        if self.solver != "auto":
            return self.solver
        from mics.solver_cost import choose_solver

        selecting = self.rank is None or self.n_channels is None
        n_folds = (self.cv if isinstance(self.cv, numbers.Integral) else 10) if selecting else 0
        n_fits = 1 + (n_folds * self.max_channels if self.n_channels is None else n_folds)
        n_candidates = (self.max_rank + 1 if self.rank is None else 0) + (
            self.max_channels + 1 if self.n_channels is None else 1
        )
        return choose_solver(
            n,
            p,
            q,
            m,
            memory_limit=self.memory_limit,
            n_channels=self.n_channels or 1,
            n_fits=n_fits,
            n_folds=n_folds,
            n_candidates=n_candidates,
            max_iter=self.max_iter,
        )

    # -------------------------------------------------------------- predict
    def _modulation_term(self, X, Z):
        Zv, _ = check_population(Z, "modulator Z", allow_1d=True, ensure_min_samples=1)
        if Zv.shape[1] != self.modulator_mean_.shape[0]:
            raise ValueError(
                f"modulator Z has {Zv.shape[1]} columns; the model was fitted with "
                f"{self.modulator_mean_.shape[0]}."
            )
        if Zv.shape[0] != X.shape[0]:
            raise ValueError(
                f"modulator Z has {Zv.shape[0]} samples but source X has {X.shape[0]}."
            )
        gates = (Zv - self.modulator_mean_) @ self._array("modulator_patterns_")
        drive = (X - self.source_mean_) @ self._array("source_patterns_")
        return Zv @ self._array("modulator_coef_").T + (gates * drive * self.channel_weights_) @ (
            self._array("target_patterns_").T
        )

    def predict(self, X, Z=None):
        """Predict target activity.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_source)
        Z : array-like of shape (n_samples, n_modulators) or (n_samples,)
            Required when the model was fitted with a modulator.

        Returns
        -------
        Y_pred : ndarray of shape (n_samples, n_target), or (n_samples,)
        """
        check_is_fitted(self)
        X, ix = self._unwrap_like_fit(X, "X")
        X = validate_data(self, X, reset=False, dtype=np.float64)
        Y = X @ np.atleast_2d(self._array("coef_")).T + self.intercept_
        if self.modulator_mean_.size:
            if Z is None:
                raise ValueError("this model was fitted with a modulator: pass Z to predict.")
            Z, _ = self._unwrap_like_fit(Z, "Z")
            Y = Y + self._modulation_term(X, Z)
        if getattr(self, "_labels", None) is not None or ix is not None:
            iy = self._labels[1] if getattr(self, "_labels", None) is not None else None
            return wrap_timeseries(Y, ix, iy)
        return Y[:, 0] if self._y_1d else Y

    def score(self, X, y, Z=None, sample_weight=None):
        """1 - NSE pooled over target neurons (test-set means, Semedo et al. 2019)."""
        if sample_weight is not None:
            raise NotImplementedError("sample_weight is not supported.")
        y, _ = unwrap(y, "Y")
        pred = np.asarray(self.predict(X, Z))
        y = np.asarray(y, dtype=float)
        return 1.0 - normalized_squared_error(y.reshape(pred.shape), pred)

    # ----------------------------------------------------------- readouts
    def communication_matrix(self, z):
        """Effective communication matrix ``B(z)`` at one modulator state.

        Parameters
        ----------
        z : array-like of shape (n_modulators,)
            Modulator values in the units of the training data.

        Returns
        -------
        B_z : ndarray of shape (n_source, n_target)
            ``B + sum_k lambda_k (c_k . (z - z_mean)) a_k b_k^T``; its average
            over the training states is the baseline ``B``.
        """
        check_is_fitted(self)
        z, _ = unwrap(z, "Z") if getattr(z, "ndim", 1) > 1 else (z, None)
        z = np.atleast_1d(np.asarray(z, dtype=float)).reshape(-1)
        if z.shape != self.modulator_mean_.shape:
            raise ValueError(
                f"z must have shape {self.modulator_mean_.shape} (one value per modulator), "
                f"got {z.shape}."
            )
        from mics.decomposition import communication_matrix

        B_z = communication_matrix(self, z)
        labels = getattr(self, "_labels", None)
        return B_z if labels is None else wrap_matrix(B_z, labels[0], labels[1])

    def modulation_tensor(self):
        """The modulation tensor ``W = sum_k lambda_k a_k o b_k o c_k``, shape (p, q, m)."""
        check_is_fitted(self)
        from mics.recovery import modulation_tensor

        return modulation_tensor(self)

    def decompose(self, metric="euclidean"):
        """Split each channel (and the whole modulation) into the four kinds.

        Returns an ``xarray.Dataset`` with per-channel fractions ``reshape``,
        ``private_source``, ``private_target`` and ``new`` (they sum to one)
        and the whole-tensor energy fractions ``total_*``. See
        :func:`mics.decomposition.decompose_channels`.
        """
        check_is_fitted(self)
        from mics.decomposition import decompose

        return decompose(self, metric=metric)

    # ---------------------------------------------------------------- saving
    def to_netcdf(self, path):
        """Save the fitted model to a netCDF file; reopen it with :func:`mics.load`.

        The file holds the hyperparameters, every fitted attribute and the
        labels of labelled inputs (neuron ids, modulator names) as plain
        numbers and strings (no pickle), with a format version; see
        :mod:`mics.persistence`.

        Parameters
        ----------
        path : str or path-like
            Where to write (conventionally ``*.nc``); overwritten if present.

        Returns
        -------
        path : pathlib.Path

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the model is not fitted.
        """
        from mics.persistence import save

        return save(self, path)
