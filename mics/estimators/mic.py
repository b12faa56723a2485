"""The ``MICs`` estimator: a thin scikit-learn class over the functional core."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from mics.core.als import cp_tensor
from mics.core.heldout import normalized_squared_error
from mics.core.linalg import single_blas_thread
from mics.core.stats import RawMoments, check_interaction
from mics.data.labels import unwrap, wrap_matrix, wrap_patterns, wrap_timeseries
from mics.data.problem import MomentProblem, concatenate_sessions, make_problem
from mics.data.quality import quality_checks
from mics.data.validation import (
    check_alpha,
    check_count,
    check_folds,
    check_population,
    check_rank,
)
from mics.estimators.base import (
    CommunicationSubspaceMixin,
    check_score_target,
    validate_x,
)
from mics.estimators.persistence import load, register, save
from mics.estimators.rrr import ReducedRankRegression, ReducedRankRegressionCV
from mics.model.fit import fit_problem
from mics.model.penalty_path import chooses_penalties, chosen_penalties
from mics.model.selection import FoldOutlierWarning, prefixed, warn_fold_outliers
from mics.model.sparsity_path import chosen_sparsity

__all__ = ["MICs", "load"]


@register
class MICs(CommunicationSubspaceMixin, BaseEstimator):
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
    alpha : float, "cv" or sequence of float, default=0.05
        Ridge penalty on the baseline, relative to the data: ``alpha`` times
        the mean per-sample source variance times ``p + q`` (the parameters
        of one communication dimension). It grows with dimension, where
        shrinkage pays, not with the number of samples. Both penalties are
        defined on the standardised inputs (see Notes), so they do not
        depend on the units of X, Y or Z. "cv" chooses it on the selection's
        folds from ``mics.model.penalty_path.ALPHA_GRID`` (0.8 to 0.00625 in
        factors of 2), a sequence from the values given: the
        candidate with the smallest mean held-out loss of the channel-free
        model (at ``rank``, or at each candidate's best rank). The chosen
        value is ``alpha_``.
    alpha_channels : float, "cv", sequence of float or None, default=0.125
        Ridge penalty on each channel factor, relative in the same way:
        times the mean per-sample interaction variance times ``p + q + m``.
        None uses ``alpha``. The defaults were chosen on simulations with
        T = 300-500 samples for p = 150, q = 100 (``results/penalties/``:
        0.125 recovers channels at least as well as v0.1 there, 0.25 did
        not); lower them when samples are plentiful. "cv" (grid
        ``mics.model.penalty_path.ALPHA_CHANNELS_GRID``, 1 to 1/128 in
        factors of 2) or a
        sequence chooses it on the same folds, after the number of channels
        (selected at the candidate nearest the default 0.125): a warm-started path from
        the largest candidate to the smallest at the selected rank and
        ``K``, the smallest mean held-out loss chosen (``alpha_channels_``;
        the fold losses are in ``cv_results_``). It costs one channel fit
        per candidate and fold, also when ``rank`` and ``n_channels`` are
        fixed (then the folds serve the penalties only); with ``K = 0`` it
        keeps the candidate nearest 0.125.
    n_init : int, default=3
        Random restarts in addition to the deterministic HOSVD start.
    max_iter : int, default=200
        Maximum alternating sweeps per stage, for the final fit and for every
        fold fit of the selection: a guard, reported when reached (a
        ``ConvergenceWarning`` on the final fit, ``cv_results_
        ["n_channels_n_capped"]`` for the fold fits); see "Acceleration and
        stopping" in ``docs/model.md``.
    tol : float, default=1e-7
        Relative loss decrease that ends a stage (a change of less than
        ``tol`` of the residual variance). Fold fits use ``max(tol, 1e-6)``.
    joint : {"auto", "alternate", "profiled"}, default="auto"
        How every fit's joint stage (baseline and channels together) is
        minimised: "alternate" moves the baseline and the channels in turn;
        "profiled" eliminates the baseline and target patterns and moves the
        source and modulator patterns by L-BFGS to a first-order stopping
        point (:mod:`mics.core.profiled`); "auto" profiles where the source
        has at least as many coordinates as samples, where the alternation
        crawls. Where an alternation stops moves the statistics with
        ``tol``; "profiled" moves them far less, at a cost in time
        (``docs/guide/many_neurons.md``, "Where a fit stops"). Sparse fits
        always alternate.
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
        simulated data sets it selected what the grid selects
        (``results/channel_search/``); choose "grid" for the whole curve,
        and for a confirmatory :func:`mics.test_modulation`: where K = 1
        predicts worse than K = 0 but K = 2 better, the sequential search
        never scores K = 2 and the test statistic misses it (some tests of
        the Park study, ``results/park2024_channel_search/``).
    gap : int, default=0
        Samples left out between training and test blocks during selection.
    solver : {"auto", "moments", "data"}, default="auto"
        "moments" fits from sufficient statistics (one pass over the data,
        then sweeps whose cost is independent of the number of samples);
        "data" works on the centred data directly, with memory linear in the
        data and the parameters (a third population as modulator). "auto"
        estimates the cost and memory of both (:mod:`mics.model.solver`) and
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
    sparsity : float, "cv" or sequence of float, default=0.0
        Group-lasso weight that sets whole neurons to zero in the channel
        patterns (an elastic net with ``alpha_channels``): a source neuron is
        in or out of every channel at once, likewise a target neuron and,
        when Z is a population, a modulator neuron. Relative to the data (in
        standard errors of the loss gradient at a neuron that carries
        nothing, see :func:`mics.core.penalties`), so it does not depend on
        units; 0 is the dense fit. A number applies to the selection's fold
        fits and the final fit. "cv" (grid
        ``mics.model.sparsity_path.SPARSITY_GRID``: 0, and 1 to 32 in
        factors of 2) or a sequence chooses it on the same folds as the rank
        and channels, after them (they are selected on the dense model): in
        every fold a path from the smallest candidate to the largest, each
        fit warm-started from the previous one, at the selected rank and
        ``K``. The chosen value (``sparsity_``) is the largest whose mean
        held-out loss is at most the lowest mean plus its standard error
        over folds: the one-SEM rule of the rank and channel counts, towards
        sparser models (the minimum keeps extra neurons; see
        :mod:`mics.model.sparsity_path`). The path is in ``cv_results_``,
        drawn by :func:`mics.plotting.plot_sparsity_path`. It costs one
        sparse fit per candidate and fold; with ``K = 0`` it is not run. See
        ``docs/guide/members.md``, and :func:`mics.stability_selection` for
        how sure each membership is (its resamples, like those of
        :func:`mics.bootstrap_channels`, refit at ``sparsity_``).
    sparse_on : str or sequence of str, default="all"
        Which patterns get the group lasso: "all" (source, target and
        modulator; the modulator only when it has more than one column), or
        some of "source", "target", "modulator" as a sequence or a
        comma-separated string ("source,target", which is saved with the
        model).
    source_components, target_components, modulator_components : int or None, default=None
        Fit that population on its first ``k`` principal components (of
        the training data) instead of its neurons, as is often done with
        thousands of neurons: faster, and **approximate** (the variance
        kept is in ``reduction_``). Patterns, coefficients and predictions
        are mapped back to the neurons. None (the default) keeps every
        neuron; a population with more neurons than samples is then fitted
        in the coordinates of its samples' span, which is exact (see
        ``docs/guide/many_neurons.md``). Ignored with a
        ``sparsity`` other than 0 and for inputs not in memory.

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
    reduction_ : dict
        Populations fitted in fewer coordinates than neurons, e.g.
        ``{"source_neurons": 3000, "source_coordinates": 2000,
        "source_exact": True, "source_variance_kept": 1.0}``: exact when a
        population has more neurons than samples, approximate with
        ``source_components`` and the like (``target_...``,
        ``modulator_...`` likewise). Empty when every population was fitted
        on its neurons.
    cv_results_ : dict
        When selection ran: per-candidate fold losses (NSE) for the rank and
        channel stages (the channel counts scored under ``n_channels``), and
        ``n_channels_n_capped``: per channel count, the fold fits that
        stopped at ``max_iter``. With penalties chosen by CV also
        ``alpha`` / ``alpha_channels`` (candidates, largest first) with
        their ``_fold_loss`` (n_candidates, n_folds), ``_mean_loss``,
        ``_sem_loss`` and ``_best_index``; ``alpha_rank`` and
        ``alpha_channels_penalised_loss`` (see
        :func:`mics.model.penalty_path.select_with_penalties`). With
        ``sparsity`` chosen by CV: ``sparsity`` (candidates, smallest
        first), ``sparsity_fold_loss`` (n_candidates, n_folds),
        ``sparsity_mean_loss``, ``sparsity_sem_loss``,
        ``sparsity_best_index`` (one-SEM), ``sparsity_lowest_index``, the
        neurons with a non-zero weight in the fold fits,
        ``sparsity_n_source``, ``sparsity_n_target``,
        ``sparsity_n_modulator`` (mean over folds; per fold in
        ``sparsity_fold_n_source`` and so on), and
        ``sparsity_penalised_loss``; see
        :func:`mics.model.sparsity_path.summarize`.
    alpha_, alpha_channels_ : float
        The relative penalties of the final fit: as given, or chosen by CV
        (``alpha_channels_`` is ``alpha_`` when ``alpha_channels`` is None).
        Set when a modulator is given.
    sparsity_ : float
        The group-lasso weight of the final fit: as given, or chosen by CV
        (with ``K = 0`` selected, the smallest candidate: there are no
        patterns to make sparse). Set when a modulator is given.
    source_scale_, target_scale_ : float
        Root mean per-neuron standard deviation of X and of Y (training data).
    modulator_scale_ : ndarray of shape (n_modulators,)
        Standard deviation of each modulator column.

    Notes
    -----
    **Units.** The fit is done on standardised inputs and every attribute is
    mapped back to the user's units (``mics.core.scales``): X and Y are each
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

    def __init__(
        self,
        rank=None,
        n_channels=None,
        *,
        alpha=0.05,
        alpha_channels=0.125,
        n_init=3,
        max_iter=200,
        tol=1e-7,
        joint="auto",
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
        sparsity=0.0,
        sparse_on="all",
        source_components=None,
        target_components=None,
        modulator_components=None,
    ):
        self.rank = rank
        self.n_channels = n_channels
        self.alpha = alpha
        self.alpha_channels = alpha_channels
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.joint = joint
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
        self.sparsity = sparsity
        self.sparse_on = sparse_on
        self.source_components = source_components
        self.target_components = target_components
        self.modulator_components = modulator_components

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
        self.fit_problem(make_problem(X, y, Z, groups=groups, validate=self._validate_xy))
        warn_fold_outliers(getattr(self, "cv_results_", None))
        return self

    @property
    def input_labels(self):
        """Labels of the last fit's labelled inputs, or None (NumPy inputs, not fitted).

        A tuple of ``mics.data.labels.LabelInfo`` (or None) for the source,
        target and modulator: the neuron and modulator names that plots,
        saved models and DataArray outputs carry.
        """
        return getattr(self, "_labels", None)

    @property
    def target_is_1d(self):
        """Whether the target was one column (predictions are then 1-D)."""
        return bool(getattr(self, "_y_1d", False))

    def restore_inputs(self, labels, y_1d):
        """Set what the last fit knew of its inputs (labels, 1-D target): for :func:`mics.load`.

        Parameters
        ----------
        labels : tuple of (LabelInfo or None) * 3 or None
        y_1d : bool
        """
        self._labels = labels
        self._y_1d = bool(y_1d)

    def fit_problem(self, problem):
        """Fit on a prepared :class:`mics.data.Problem` (what :meth:`fit` does after checks).

        Workflows that fit many variants of one data set (null data sets,
        resamples) prepare the problem once and fit its variants here;
        :func:`mics.data.make_problem` builds it from arrays.

        Parameters
        ----------
        problem : mics.data.Problem

        Returns
        -------
        self
        """
        check_alpha(self.alpha, choose=True)
        if self.alpha_channels is not None:
            check_alpha(self.alpha_channels, "alpha_channels", choose=True)
        self._labels = problem.labels
        if not problem.has_modulator and not problem.in_memory:
            raise ValueError(
                "chunked (Dask) inputs need a modulator Z; without one the model is a "
                "reduced-rank regression: ReducedRankRegressionCV accepts Dask arrays."
            )
        if not problem.has_modulator:
            self._fit_without_modulator(problem)
            return self._label_outputs()
        outcome = fit_problem(self.get_params(deep=False), problem)
        self.solver_ = outcome.solver
        self.reduction_ = {} if outcome.reduction is None else outcome.reduction.summary()
        if outcome.cv_results is not None:
            self.cv_results_ = outcome.cv_results
        self.alpha_, self.alpha_channels_ = chosen_penalties(
            self.get_params(deep=False), outcome.cv_results
        )
        self.sparsity_ = chosen_sparsity(self.get_params(deep=False), outcome.cv_results)
        if not problem.in_memory:
            self.n_features_in_ = problem.shape[1]
            if hasattr(self, "feature_names_in_"):
                del self.feature_names_in_
        self._set_scales(outcome.scales)
        with single_blas_thread():  # small SVDs, see fit_mic_model
            self._store(outcome.fit, outcome.moments, outcome.rank)
        self._finish(problem.y_1d)
        return self._label_outputs()

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
        :func:`mics.data.moments_from_sessions`). To fit each session on
        its own, use :func:`mics.workflows.fit_each_session`.

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
        joined, lengths = concatenate_sessions(sessions)
        self.fit(*joined, groups=groups)
        self.session_lengths_ = lengths
        return self

    def fit_moments(self, moments, y_1d=False):
        """Fit from raw moments alone; the result is a full estimator.

        Parameters
        ----------
        moments : RawMoments or sequence of RawMoments
            From :func:`mics.core.compute_moments` or
            :func:`mics.data.moments_from_dask` (``interaction=True``).
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
        folds = None
        if self.rank is None or self.n_channels is None or chooses_penalties(self.get_params()):
            if len(blocks) < 2:
                raise ValueError(
                    "selecting rank or n_channels (or a penalty) needs the moments of at "
                    "least two blocks (each is held out in turn); pass a list of block "
                    "moments or fix them."
                )
            folds = [(None, None, b, b) for b in blocks]
        if total.n < 2:
            raise ValueError(f"at least 2 samples are needed, got {total.n}.")
        q = total.Gy.shape[2]
        if y_1d and q != 1:
            raise ValueError(f"y_1d needs a single target column, the moments have {q}.")
        self._labels = None
        problem = MomentProblem(None, None, None, None, bool(y_1d), None, total=total, folds=folds)
        self.fit_problem(problem)
        warn_fold_outliers(getattr(self, "cv_results_", None))
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
        labels = self.input_labels
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

    def _fit_without_modulator(self, problem):
        """Without a modulator the model is a reduced-rank regression."""
        X, Y, y_1d, groups = problem.X, problem.Y, problem.y_1d, problem.groups
        check_count(self.max_rank, "max_rank", 0)
        check_folds(self.cv)
        p, q = X.shape[1], Y.shape[1]
        if self.rank is None:
            inner = ReducedRankRegressionCV(ranks=range(self.max_rank + 1), cv=self.cv)
            # the data were checked when this fit made its problem, and this
            # fit warns about the table it keeps
            with quality_checks(False), warnings.catch_warnings():
                warnings.simplefilter("ignore", FoldOutlierWarning)
                inner.fit(X, Y, groups=groups)
            # also under the keys of a fit with a modulator ("rank_mean_loss",
            # ...), so code reading either kind of fit needs no special case
            self.cv_results_ = {**inner.cv_results_, **prefixed(inner.cv_results_, "rank")}
            rank = inner.rank_
        else:
            rank = check_rank(self.rank, p, q)
            inner = ReducedRankRegression(rank=rank).fit(X, Y)
        self.rank_ = int(rank)
        self.n_channels_ = 0
        self.solver_ = "moments"
        self.reduction_ = {}
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
        X = validate_x(self, X)
        Y = X @ np.atleast_2d(self._array("coef_")).T + self.intercept_
        if self.modulator_mean_.size:
            if Z is None:
                raise ValueError("this model was fitted with a modulator: pass Z to predict.")
            Z, _ = self._unwrap_like_fit(Z, "Z")
            Y = Y + self._modulation_term(X, Z)
        if self.input_labels is not None or ix is not None:
            iy = self._labels[1] if self.input_labels is not None else None
            return wrap_timeseries(Y, ix, iy)
        return Y[:, 0] if self._y_1d else Y

    def score(self, X, y, Z=None, sample_weight=None):
        """1 - NSE pooled over target neurons (test-set means, Semedo et al. 2019)."""
        if sample_weight is not None:
            raise NotImplementedError("sample_weight is not supported.")
        y, _ = unwrap(y, "Y")
        pred = np.asarray(self.predict(X, Z))
        return 1.0 - normalized_squared_error(check_score_target(y, pred), pred)

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
        from mics.model.decomposition import communication_matrix

        B_z = communication_matrix(self, z)
        labels = self.input_labels
        return B_z if labels is None else wrap_matrix(B_z, labels[0], labels[1])

    def modulation_tensor(self):
        """The modulation tensor ``W = sum_k lambda_k a_k o b_k o c_k``, shape (p, q, m)."""
        check_is_fitted(self)
        return cp_tensor(
            self.channel_weights_,
            self._array("source_patterns_"),
            self._array("target_patterns_"),
            self._array("modulator_patterns_"),
        )

    def decompose(self, metric="euclidean"):
        """Split each channel (and the whole modulation) into the four kinds.

        Returns an ``xarray.Dataset`` with per-channel fractions ``reshape``,
        ``private_source``, ``private_target`` and ``new`` (they sum to one)
        and the whole-tensor energy fractions ``total_*``. See
        :func:`mics.model.decompose_channels`.
        """
        check_is_fitted(self)
        from mics.model.decomposition import decompose

        return decompose(self, metric=metric)

    def heldout_gains(self):
        """Per-channel held-out gains from the selection's CV table.

        Returns
        -------
        gains : ndarray of shape (k,)
            ``gains[j]``: the fraction of held-out target variance the
            ``(j + 1)``-th channel adds (mean NSE of ``j`` channels minus that
            of ``j + 1``, on the selection's folds), for ``k = max(n_channels_,
            1)`` channels; they sum to the channels' effect size. None when no
            channel selection ran (``n_channels`` fixed).
        """
        check_is_fitted(self)
        res = getattr(self, "cv_results_", None) or {}
        if "n_channels_mean_loss" not in res:
            return None
        k = max(self.n_channels_, 1)
        loss = np.asarray(res["n_channels_mean_loss"])[: k + 1]
        return -np.diff(loss) if loss.size == k + 1 else None

    def summary(self, test=None, power=None, alpha=0.05):
        """One sentence on the fit (and on its test, when given).

        Parameters
        ----------
        test : ModulationTest, optional
            :func:`mics.test_modulation` on the same data: its verdict and
            the effect size's interval are quoted.
        power : PowerAnalysis or float, optional
            A :func:`mics.power_analysis` of the same data (its minimum
            detectable effect is quoted with the test).
        alpha : float
            Level at which the test's "detected" is said.

        Returns
        -------
        str
        """
        check_is_fitted(self)
        K, r = self.n_channels_, self.rank_
        head = f"MICs at rank {r} with {K} channel(s)"
        gains = self.heldout_gains()
        if gains is None:
            text = f"{head} (fixed, so no held-out effect size: run mics.test_modulation)."
        elif K == 0:
            text = (
                f"{head}: channels do not improve held-out prediction at this sample size "
                f"(selected K = 0; one channel would explain {100 * gains.sum():.2g}% of the "
                "held-out target variance beyond the additive model)."
            )
        else:
            per = ", ".join(f"{100 * g:.2g}%" for g in gains)
            text = (
                f"{head}: the channels explain {100 * gains.sum():.2g}% of the held-out target "
                f"variance beyond the additive model (cross-validated; per channel {per})."
            )
        if test is not None:
            text += " " + test.summary(power=power, alpha=alpha)
        return text

    # ---------------------------------------------------------------- saving
    def to_netcdf(self, path):
        """Save the fitted model to a netCDF file; reopen it with :func:`mics.load`.

        The file holds the hyperparameters, every fitted attribute and the
        labels of labelled inputs (neuron ids, modulator names) as plain
        numbers and strings (no pickle), with a format version; see
        :mod:`mics.estimators.persistence`.

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
        return save(self, path)
