"""Member neurons of each channel, with a false-discovery rate the user sets.

A channel ``lambda (c . z)(a . x) b`` has *members*: the source neurons
``i`` with ``a_i != 0``, the target neurons ``j`` with ``b_j != 0`` and the
modulator neurons ``l`` with ``c_l != 0``. A sparse fit names them but says
nothing about how many of the names are wrong, and when neurons share
variability (a few latent factors, neighbours that co-fluctuate) the group
lasso readily names neurons that are only correlated with the members.
:func:`member_neurons` tests every neuron instead, and names the members of
each role at a false-discovery rate ``fdr`` chosen by the user.

**Why regression tests, not knockoffs.** Model-X knockoffs test "``Y`` is
independent of ``x_i`` given the other neurons". A source neuron that
drives the target through the ungated baseline ``B`` is non-null for that
question although it is no member of the channel, so knockoffs answer
another question here; and target neurons are responses, to which
knockoffs do not apply. Each member question is instead a zero coefficient
of a linear regression, once the channel's other factors are known:

- source neuron ``i``: the coefficient of ``g(z) x_i`` in the regression of
  the target activity projected on the channel's target pattern, ``Y b``,
  on ``[1, X, Z, g(z) X]``, with ``g(z) = c . z`` the gate;
- modulator neuron ``l``: the coefficient of ``s(x) z_l``, ``s(x) = a . x``
  the channel's source signal, in the regression of ``Y b`` on
  ``[1, X, Z, s(x) Z]``;
- target neuron ``j``: the coefficient of the gated signal ``h = g(z) s(x)``
  in the regression of ``y_j`` on ``[1, X, Z, h]``.

The additive terms (``X``, ``Z``) are controls: a neuron's main effect never
counts as membership. Every source neuron enters the source regression at
once, so a non-member correlated with the members (through shared factors
or a spatial neighbourhood) is judged by its partial effect, which is zero.

**Cross-fitting.** ``a``, ``b`` and ``c`` come from dense fits of the same
model on the *other* folds of whole trials (contiguous blocks of time
without trial ids), aligned to the user's fit, and each fold's rows are
tested with the factors fitted without them (cross-fitting; Chernozhukov et
al. 2018), so the factors never adapt to the noise they are tested on. The
estimated gate ``c_hat . z`` misses the true gate by a modulator direction
other than ``c_hat``; the source regression therefore also holds
``s_hat(x) * (Z without its c_hat part)``, the bilinear term linearised
around the fitted factors, which absorbs that error to first order (and
symmetrically for the modulator regression). A poorly estimated factor
then costs power, not validity.

**Autocorrelation and trials.** Samples of calcium recordings are
correlated over seconds. The regressions are prewhitened within trials by
the lag-1 autocorrelation of the cross-fitted model's out-of-sample
residuals (in-sample residuals of regressions with hundreds of
autocorrelated regressors understate it), their standard errors are
cluster-robust over trials (or blocks) with the CR2 small-sample
correction and Bell-McCaffrey degrees of freedom
(:func:`mics.core.clustered.clustered_ols`), and the folds are made of
whole clusters.

**The lists.** Each role's list of each channel is a Benjamini-Yekutieli
(default; any dependence between the neurons' p-values) or
Benjamini-Hochberg selection at ``fdr``. Members are named only for
channels whose cross-fitted gated signal is itself significant at ``fdr``
(the regression of ``Y b`` on ``h`` with the same controls). Emptying a
list can only lower its false-discovery rate, and on data without a
channel every list is then empty with probability at least ``1 - fdr``.

**The channel test is made fold by fold.** Without a channel the fitted
factors are fits to noise, and the factors used on fold ``f`` fit the
noise of the folds on which the others are tested: the folds' statistics
are then positively correlated and a test pooled over folds rejects too
often (20-30% of simulated data sets at the 10% level). Each fold is
therefore tested on its own rows, and the folds' p-values are merged by
twice their median, which is valid under any dependence between them
(Meinshausen, Meier & Buhlmann 2009). With a channel the factors converge
to the channel's and the member tests pool the folds, each fold's factors
aligned in sign to the user's fit.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import numpy as np
from sklearn.base import clone

from mics.core.clustered import (
    cluster_codes,
    clustered_ols,
    fdr_select,
    residual_autocorrelation,
)
from mics.data.folds import cv_splits
from mics.data.problem import make_problem
from mics.data.validation import check_count, check_fraction
from mics.workflows.inference import align_channels, fitted_penalties
from mics.workflows.stability import pattern_labels

__all__ = ["MemberNeurons", "member_neurons", "guarantee"]

_ROLES = ("source", "target", "modulator")
_METHODS = {
    "by": "Benjamini-Yekutieli: valid under any dependence between the neurons' p-values",
    "bh": (
        "Benjamini-Hochberg: valid for independent or positively dependent (PRDS) p-values; "
        "strongly correlated neurons can give negatively correlated statistics, for which "
        "it is not guaranteed (measured at about the nominal rate in "
        "results/member_fdr/)"
    ),
}
_COMMON = (
    "Assumes: trials (or blocks) independent of one another; enough of them for the "
    "clustered t-tests (about 30 or more); the MIC model holds for the non-members "
    "(a nonlinear source-to-target map can look like gating when Z is correlated with X)"
)


def guarantee(role, method="by", n_modulators=2, controls="full"):
    """What a member list of :func:`member_neurons` guarantees, and under which assumptions.

    Parameters
    ----------
    role : {"source", "target", "modulator"}
    method : {"by", "bh"}
    n_modulators : int
        With one modulator the modulator "list" is the channel test.
    controls : {"full", "subspace"}
        The main effects in the regressions (see :func:`member_neurons`).

    Returns
    -------
    str
    """
    if role not in _ROLES:
        raise ValueError(f"role must be one of {_ROLES}, got {role!r}.")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {tuple(_METHODS)}, got {method!r}.")
    if role == "modulator" and n_modulators == 1:
        return (
            "One modulator: it is the member of every channel whose cross-fitted test is "
            "significant at fdr (its p-value is the channel's); nothing to select."
        )
    head = (
        f"Expected share of false {role} members <= fdr, per channel ({_METHODS[method]}); "
        "members are named only for a channel whose own cross-fitted test (fold by fold, "
        "merged by twice the median p-value) is significant at fdr."
    )
    null = {
        "source": "Null of neuron i: zero coefficient of gate(z) * x_i in the regression of "
        "the channel's projected target activity on [1, X, Z, gate(z) * X], gate and target "
        "pattern cross-fitted on other trials.",
        "target": "Null of neuron j: zero coefficient of the channel's cross-fitted gated "
        "signal gate(z) * (a . x) in the regression of y_j on [1, X, Z, gated signals]; "
        "with several channels the other channels' signals are taken as known.",
        "modulator": "Null of neuron l: zero coefficient of (a . x) * z_l in the regression "
        "of the channel's projected target activity on [1, X, Z, (a . x) * Z], source and "
        "target patterns cross-fitted on other trials.",
    }[role]
    extra = ""
    if role != "target":
        extra = (
            "; the modulator not driven by the source's fluctuations beyond a linear relation"
            if controls == "full"
            else "; the modulator independent of the source (the main effects are controlled "
            "through the baseline's source subspace only)"
        )
    return (
        f"{head} {null} {_COMMON}{extra}. Holds with correlated (shared-variability) "
        "neurons and with samples autocorrelated within trials."
    )


@dataclass(repr=False)
class MemberNeurons:
    """Member lists of :func:`member_neurons`, each with its false-discovery guarantee.

    Indexing (``result["source_members"]``) reads the underlying
    :class:`xarray.Dataset`, so the result goes wherever a
    :func:`mics.stability_selection` result is accepted for its members
    (:func:`mics.workflows.member_table`, the member figures of
    :mod:`mics.plotting`). ``repr`` prints the counts, the channel tests and
    the guarantee of every list.

    Attributes
    ----------
    dataset : xarray.Dataset
        For each role ``source``, ``target``, ``modulator`` (dimension named
        after the role, coordinates the neuron ids), over ``(role,
        channel)``: ``{role}_members`` (bool, the list at ``fdr``),
        ``{role}_p_value``, ``{role}_q_value`` (the adjusted p-value of the
        chosen method: a neuron is a member when it is at most ``fdr`` and
        its channel passed its test), ``{role}_statistic`` (the clustered t),
        ``{role}_estimate`` (the tested coefficient), ``{role}_pattern`` (the
        user's fit); per channel ``{role}_n_members``, ``channel_p_value``
        (twice the median of the folds' p-values, ``channel_fold_p_value``
        over ``(channel, fold)``), ``channel_statistic`` (the median of the
        folds' t statistics), ``channel_named`` (the channel passed its
        test, so its members are named) and ``channel_autocorrelation`` (the
        lag-1 autocorrelation used to prewhiten). With one modulator its rows
        repeat the channel test. Attributes: ``fdr``,
        ``method``, ``n_folds``, ``n_clusters``, ``clusters`` ("trial" or
        "block"), ``block_length`` (-1 for trials), ``controls``,
        ``target_autocorrelation`` and ``guarantee_source``,
        ``guarantee_target``, ``guarantee_modulator``.
    """

    dataset: object

    def __getitem__(self, key):
        return self.dataset[key]

    def __contains__(self, key):
        return key in self.dataset

    @property
    def attrs(self):
        """The attributes of :attr:`dataset` (settings and guarantees)."""
        return self.dataset.attrs

    @property
    def fdr(self):
        """The target false-discovery rate."""
        return float(self.dataset.attrs["fdr"])

    def members(self, role, channel=0):
        """Neuron ids of the members of one role of one channel.

        Parameters
        ----------
        role : {"source", "target", "modulator"}
        channel : int, default=0

        Returns
        -------
        ndarray
        """
        if role not in _ROLES:
            raise ValueError(f"role must be one of {_ROLES}, got {role!r}.")
        mask = self.dataset[f"{role}_members"].isel(channel=channel)
        return np.asarray(mask[role].values)[np.asarray(mask, dtype=bool)]

    def at(self, fdr, method=None):
        """The same tests with the lists drawn at another rate (or by the other method).

        Parameters
        ----------
        fdr : float in (0, 1)
        method : {"by", "bh"}, optional
            Default: this result's method.

        Returns
        -------
        MemberNeurons
            The p-values are those of this result; the lists, q-values,
            channel verdicts and guarantees are those at ``fdr`` by ``method``.
        """
        check_fraction(fdr, "fdr")
        ds = self.dataset.copy(deep=True)
        a = ds.attrs
        method = a["method"] if method is None else method
        if method not in _METHODS:
            raise ValueError(f"method must be one of {tuple(_METHODS)}, got {method!r}.")
        tables = {
            role: {key: np.asarray(ds[f"{role}_{key}"]).copy() for key in _TABLE_KEYS}
            for role in _ROLES
        }
        channel = {"p_value": np.asarray(ds["channel_p_value"])}
        m = ds.sizes["modulator"]
        _select(tables, channel, fdr, method, m)
        for role in _ROLES:
            for key in ("members", "q_value"):
                ds[f"{role}_{key}"].values = tables[role][key]
            ds[f"{role}_n_members"].values = tables[role]["members"].sum(axis=0)
        ds["channel_named"].values = channel["named"]
        ds.attrs["fdr"] = float(fdr)
        ds.attrs["method"] = method
        for role in _ROLES:
            ds.attrs[f"guarantee_{role}"] = guarantee(role, method, m, a["controls"])
        return MemberNeurons(ds)

    def table(self):
        """The members as a table (:func:`mics.workflows.member_table`)."""
        from mics.workflows.stability import member_table

        return member_table(self)

    def __repr__(self):
        ds = self.dataset
        K = ds.sizes.get("channel", 0)
        a = ds.attrs
        lines = [
            f"MemberNeurons(fdr={a['fdr']:g}, method={a['method']!r}, {a['n_clusters']} "
            f"{a['clusters']}s, {a['n_folds']} cross-fitting folds, controls={a['controls']!r})"
        ]
        if K == 0:
            lines.append("  no channel: no members.")
        for k in range(K):
            named = bool(ds["channel_named"][k])
            counts = ", ".join(
                f"{role} {int(ds[f'{role}_n_members'][k])}/{ds.sizes[role]}" for role in _ROLES
            )
            verdict = "members named" if named else "not significant: no members named"
            lines.append(
                f"  channel {k}: channel test p = {float(ds['channel_p_value'][k]):.3g} "
                f"({verdict}); members {counts}"
            )
        lines.append("Guarantees:")
        for role in _ROLES:
            lines.append(f"  {role}:")
            lines.append(
                textwrap.fill(
                    a[f"guarantee_{role}"],
                    width=88,
                    initial_indent="    ",
                    subsequent_indent="    ",
                )  # fmt: skip
            )
        return "\n".join(lines)


_TABLE_KEYS = ("members", "p_value", "q_value", "statistic", "estimate")


# ------------------------------------------------------------------ folds
def _clusters(n, groups, block_length):
    """Cluster code of every sample (trials, or contiguous blocks), kind and block length."""
    if groups is not None:
        codes, _ = cluster_codes(groups)
        return codes, "trial", -1
    if block_length is None:
        block_length = max(1, int(round(np.sqrt(n))))
    block_length = check_count(block_length, "block_length", 1, n)
    return np.arange(n) // block_length, "block", block_length


def _fold_fit(fixed, problem, seed):
    """The fixed-size dense model fitted on the rows of the other folds."""
    return clone(fixed).set_params(random_state=seed).fit_problem(problem)


@dataclass
class _CrossFit:
    """Cross-fitted quantities of every sample (from the fit without its fold)."""

    fold: np.ndarray  # (n,): the fold of every sample
    Xc: np.ndarray  # (n, p): x centred by its fold's training means
    Zc: np.ndarray  # (n, m)
    gates: np.ndarray  # (n, K): c_k . z
    drives: np.ndarray  # (n, K): a_k . x
    Y: np.ndarray  # (n, q): the recorded target
    residual: np.ndarray  # (n, q): y minus the fitted baseline and additive terms
    heldout: np.ndarray  # (n, q): y minus the whole fitted model (out of sample)
    subspace: np.ndarray  # (n, r): x on the fold's source subspace
    A: np.ndarray  # (n_folds, p, K): each fold's aligned source patterns
    B: np.ndarray  # (n_folds, q, K): target patterns
    C: np.ndarray  # (n_folds, m, K): modulator patterns

    def projected(self, values, k):
        """Rows of ``values`` (n, q) on their fold's target pattern of channel ``k``."""
        return np.einsum("nq,nq->n", values, self.B[self.fold, :, k])

    def without_pattern(self, role, k):
        """Xc (or Zc) without its part along each fold's source (modulator) pattern ``k``."""
        values, P = (self.Xc, self.A) if role == "source" else (self.Zc, self.C)
        along = self.drives[:, k] if role == "source" else self.gates[:, k]
        return values - along[:, None] * P[self.fold, :, k]


def _cross_fit(model, fits, splits, X, Y, Z):
    n, p = X.shape
    q, m, K, r = Y.shape[1], Z.shape[1], int(model.n_channels_), int(model.rank_)
    cf = _CrossFit(
        fold=np.zeros(n, dtype=int),
        Xc=np.zeros((n, p)),
        Zc=np.zeros((n, m)),
        gates=np.zeros((n, K)),
        drives=np.zeros((n, K)),
        Y=Y,
        residual=np.zeros((n, q)),
        heldout=np.zeros((n, q)),
        subspace=np.zeros((n, r)),
        A=np.zeros((len(fits), p, K)),
        B=np.zeros((len(fits), q, K)),
        C=np.zeros((len(fits), m, K)),
    )
    for f, (fit, (_, test)) in enumerate(zip(fits, splits, strict=True)):
        cf.fold[test] = f
        order, sa, sb = align_channels(model, fit)
        A = fit.source_patterns_[:, order] * sa
        B = fit.target_patterns_[:, order] * sb
        C = fit.modulator_patterns_[:, order] * (sa * sb)
        # centred by the training means, as the fit would predict: centring by
        # the fold's own means would tie the fold's clusters together (their
        # sums would cancel), and the clustered errors, which take clusters as
        # independent, would then be too large (null p < 0.05 in 2.8% instead
        # of 5% of simulated source tests)
        xc = X[test] - fit.source_mean_
        zc = Z[test] - fit.modulator_mean_
        cf.Xc[test], cf.Zc[test] = xc, zc
        cf.gates[test] = zc @ C
        cf.drives[test] = xc @ A
        cf.A[f], cf.B[f], cf.C[f] = A, B, C
        cf.subspace[test] = xc @ np.asarray(fit.source_subspace_)
        linear = fit.intercept_ + X[test] @ np.asarray(fit.coef_).T
        cf.residual[test] = Y[test] - linear - Z[test] @ np.asarray(fit.modulator_coef_).T
        cf.heldout[test] = Y[test] - np.asarray(fit.predict(X[test], Z[test])).reshape(-1, q)
    return cf


def _n_columns(controls, p, m, K, r):
    """Columns of the widest regression (source or modulator test)."""
    main = 1 + m + (p if controls == "full" else r) + (K - 1)
    if m == 1:
        return main + p
    return main + p + m  # tested block plus the linearised block of the other role


def _choose_controls(controls, n, p, m, K, r):
    if controls not in ("auto", "full", "subspace"):
        raise ValueError(f"controls must be 'auto', 'full' or 'subspace', got {controls!r}.")
    if controls == "auto":
        # every source neuron's main effect while the widest regression keeps
        # three samples per column; otherwise the baseline's source subspace
        controls = "full" if _n_columns("full", p, m, K, r) <= n / 3 else "subspace"
    cols = _n_columns(controls, p, m, K, r)
    if cols >= n / 1.5:
        raise ValueError(
            f"the member regressions need {cols} columns for {n} samples: too few samples "
            "to test every neuron. Record longer, or test fewer neurons."
        )
    return controls


# ------------------------------------------------------------------ workflow
def member_neurons(
    model,
    X,
    Y,
    Z,
    *,
    fdr=0.1,
    groups=None,
    method="by",
    n_folds=5,
    block_length=None,
    controls="auto",
    prewhiten=True,
    n_jobs=None,
    verbose=1,
    random_state=None,
):
    """Member neurons of each channel, at a false-discovery rate ``fdr``.

    Every source, target and modulator neuron is tested for membership of every
    channel by a cluster-robust regression with cross-fitted channel factors
    (the method: :mod:`mics.workflows.members`; when it applies:
    ``docs/guide/members.md``). Each role's list of each channel is a
    Benjamini-Yekutieli (or Benjamini-Hochberg) selection at ``fdr``.

    Parameters
    ----------
    model : MICs
        Fitted (its rank, number of channels and penalties are used, and its
        channels are the ones whose members are named) or unfitted (then
        fitted here on ``X, Y, Z`` and ``groups``). A sparse model is fine:
        the cross-fitted factors come from dense fits of the same size.
    X : array-like of shape (n_samples, n_source)
    Y : array-like of shape (n_samples, n_target)
    Z : array-like of shape (n_samples, n_modulators) or (n_samples,)
        The data the model was fitted on, in memory (NumPy or xarray;
        DataArrays give the neuron ids).
    fdr : float in (0, 1), default=0.1
        Target false-discovery rate of every list.
    groups : array-like of shape (n_samples,), optional
        Trial ids: the clusters of the standard errors and the units of the
        cross-fitting folds. Taken from a ``trial`` coordinate of a labelled
        input when not given. Without them, contiguous blocks of
        ``block_length`` samples stand in for trials.
    method : {"by", "bh"}, default="by"
        Benjamini-Yekutieli (valid under any dependence between the neurons'
        p-values) or the more powerful Benjamini-Hochberg (see Notes).
    n_folds : int, default=5
        Cross-fitting folds (contiguous runs of whole trials or blocks).
    block_length : int, optional
        Samples per block without trial ids; default ``sqrt(n_samples)``.
        Blocks should be much longer than the autocorrelation of the data.
    controls : {"auto", "full", "subspace"}, default="auto"
        Main effects of the source in the regressions: "full" every neuron
        (exact whatever the baseline, and valid when Z is linearly related
        to X); "subspace" the cross-fitted source subspace of the baseline
        (``rank_`` columns), for populations too large for "full" (it
        assumes Z independent of X); "auto" takes "full" while the widest
        regression has at least three samples per column.
    prewhiten : bool, default=True
        Quasi-difference the regressions within clusters by the lag-1
        autocorrelation of the out-of-sample residuals before the clustered
        standard errors (False: clustered errors alone; on AR(1) data with
        lag-1 autocorrelation 0.8 they are about 10% too small).
    n_jobs : int or None
        Parallel cross-fitting fits (joblib).
    verbose : int, default=1
        Progress bar over the folds.
    random_state : int, RandomState or None
        Seeds the fold fits.

    Returns
    -------
    MemberNeurons
        The lists, the p-values, adjusted p-values and statistics of every
        neuron, the channel tests, and the guarantee of each list with its
        assumptions (printed by its ``repr``; ``result.at(0.2)`` draws the
        lists at another rate from the same tests).

    Raises
    ------
    ValueError
        When the data do not match the model or are not in memory, when
        there are fewer trials (blocks) than ``2 * n_folds``, or too few
        samples for the regressions.

    Notes
    -----
    The guarantee of each list (also the result's ``guarantee_*`` attributes):
    the expected share of false members among those named is at most ``fdr``,
    per role and channel, if the trials (or blocks) are independent of one
    another, are enough for the clustered t-tests (about 30 or more), and the
    model holds for the non-members; for the source and modulator lists also if
    the modulator is not driven by the source's fluctuations beyond a linear
    relation. Shared variability among the neurons and autocorrelation within
    trials are allowed: that is what the method is for. ``method="bh"``
    moreover needs positively dependent p-values, which correlated neurons do
    not ensure; on simulated populations with strong shared variability its
    realised false-discovery rate was about the nominal one, that of ``"by"``
    well below (``results/member_fdr/``).

    With one modulator (``m = 1``) the modulator list is that modulator, for
    every channel that passes its test. With several channels the target
    lists take the other channels' gated signals as known (the validations
    use one channel).

    References
    ----------
    Benjamini & Hochberg, JRSS B 1995. Benjamini & Yekutieli, Ann. Stat.
    2001. Bell & McCaffrey, Survey Methodology 2002. Imbens & Kolesar, Rev.
    Econ. Stat. 2016. Chernozhukov et al., Econometrics Journal 2018.
    """
    fdr = check_fraction(fdr, "fdr")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {tuple(_METHODS)}, got {method!r}.")
    n_folds = check_count(n_folds, "n_folds", 2)
    model, problem = _checked_problem(model, X, Y, Z, groups)
    design = _design(model, problem, n_folds, block_length, controls)
    cf = _fit_other_folds(
        model, problem, design, n_jobs=n_jobs, verbose=verbose, random_state=random_state
    )
    tests = _member_tests(model, problem.shape, design, cf, prewhiten)
    m = problem.shape[3]
    _select(tests.tables, tests.channel, fdr, method, m)
    ds = _member_dataset(model, problem.shape, tests)
    ds.attrs = _attributes(design, tests, fdr=fdr, method=method, prewhiten=prewhiten, m=m)
    return MemberNeurons(ds)


class _Design(NamedTuple):
    """The clusters of the samples, the cross-fitting folds and the regressions' controls."""

    codes: np.ndarray  # (n,): the cluster (trial or block) of every sample
    kind: str  # "trial" or "block"
    block_length: int  # -1 for trials
    n_clusters: int
    n_folds: int
    controls: str  # "full" or "subspace"


class _Tests(NamedTuple):
    """Every role's table of neuron tests, the channel tests, and why none ran (or "")."""

    tables: dict
    channel: dict
    note: str


def _checked_problem(model, X, Y, Z, groups):
    """The fitted model (fitted here when it is not) and the in-memory data it was fitted on."""
    if Z is None:
        raise ValueError("member_neurons needs the modulator Z the model was fitted with.")
    if not hasattr(model, "n_channels_"):
        model = clone(model).fit(X, Y, Z, groups=groups)
    problem = make_problem(X, Y, Z, groups=groups).unlabelled()
    if not problem.in_memory:
        raise ValueError(
            "member_neurons needs the data in memory (NumPy or in-memory xarray): the tests "
            "regress on the rows. Load chunked inputs first (.compute() or .load())."
        )
    _, p, q, m = problem.shape
    fitted = (
        np.asarray(model.source_mean_).size,
        np.atleast_1d(model.intercept_).size,
        np.asarray(model.modulator_mean_).size,
    )
    for name, got, want in zip(("source X", "target Y", "modulator Z"), (p, q, m), fitted,
                               strict=True):  # fmt: skip
        if got != want:
            raise ValueError(
                f"{name} has {got} columns but the model was fitted with {want}: pass the "
                "data the model was fitted on."
            )
    return model, problem


def _design(model, problem, n_folds, block_length, controls):
    """The clusters and controls, checked against the number of samples."""
    n, p, _, m = problem.shape
    K, r = int(model.n_channels_), int(model.rank_)
    codes, kind, block_length = _clusters(n, problem.groups, block_length)
    n_clusters = int(codes.max()) + 1
    if n_clusters < 2 * n_folds:
        raise ValueError(
            f"{n_clusters} {kind}s for {n_folds} cross-fitting folds: need at least {2 * n_folds} "
            "(shorten block_length or lower n_folds)."
        )
    controls = _choose_controls(controls, n, p, m, max(K, 1), r)
    return _Design(codes, kind, block_length, n_clusters, n_folds, controls)


def _fit_other_folds(model, problem, design, *, n_jobs, verbose, random_state):
    """Dense fits of the model's size on the other folds, applied to every sample's fold.

    None when the model has no non-empty channel (nothing to test).
    """
    K, r = int(model.n_channels_), int(model.rank_)
    if not (K and np.any(np.asarray(model.channel_weights_))):
        return None
    n, n_folds, codes = problem.shape[0], design.n_folds, design.codes
    splits = list(cv_splits(n_folds, n, groups=codes))
    fixed = clone(model).set_params(
        rank=r, n_channels=K, sparsity=0.0, verbose=0, n_jobs=1, **fitted_penalties(model)
    )
    seeds = np.random.RandomState(random_state).randint(np.iinfo(np.int32).max, size=n_folds)
    variants = ((problem.resampled(train, codes[train]), s)
                for (train, _), s in zip(splits, seeds, strict=True))  # fmt: skip
    fits = list(problem.map(partial(_fold_fit, fixed), variants, n_jobs=n_jobs,
                            desc="cross-fitting", verbose=verbose, total=n_folds))  # fmt: skip
    return _cross_fit(model, fits, splits, problem.X, problem.Y, problem.Z)


def _member_tests(model, shape, design, cf, prewhiten):
    """The tests of every neuron and channel (before selection); NaN without a channel."""
    _, p, q, m = shape
    K = int(model.n_channels_)
    tables = {role: _empty_table(K, size) for role, size in zip(_ROLES, (p, q, m), strict=True)}
    channel = {
        "fold_p_values": np.full((K, design.n_folds), np.nan),
        "p_value": np.full(K, np.nan),
        "statistic": np.full(K, np.nan),
        "autocorrelation": np.full(K, np.nan),
        "target_autocorrelation": np.nan,
    }
    note = ""
    if cf is not None:
        _test_channels(cf, design.codes, design.controls, prewhiten, tables, channel)
    elif K:
        note = "every channel of the model is empty (its sparsity zeroed it): no members."
    else:
        note = "the model has no channel: no members."
    return _Tests(tables, channel, note)


def _member_dataset(model, shape, tests):
    """The result's variables: every role's table over (neuron, channel), the channel tests."""
    import xarray as xr

    tables, channel = tests.tables, tests.channel
    ds = xr.Dataset()
    chan = np.arange(int(model.n_channels_))
    for role, size in zip(_ROLES, shape[1:], strict=True):
        pattern = getattr(model, f"{role}_patterns_")
        coords = {role: pattern_labels(pattern, size), "channel": chan}
        dims = (role, "channel")
        for key in _TABLE_KEYS:
            ds[f"{role}_{key}"] = xr.DataArray(tables[role][key], dims=dims, coords=coords)
        ds[f"{role}_pattern"] = xr.DataArray(np.asarray(pattern), dims=dims, coords=coords)
        ds[f"{role}_n_members"] = ("channel", tables[role]["members"].sum(axis=0))
    for key in ("p_value", "statistic", "named", "autocorrelation"):
        ds[f"channel_{key}"] = ("channel", channel[key])
    ds["channel_fold_p_value"] = (("channel", "fold"), channel["fold_p_values"])
    return ds.assign_coords(channel=chan)


def _attributes(design, tests, *, fdr, method, prewhiten, m):
    """The result's settings and the guarantee of every list."""
    return dict(
        fdr=fdr,
        method=method,
        n_folds=design.n_folds,
        n_clusters=design.n_clusters,
        clusters=design.kind,
        block_length=design.block_length,
        controls=design.controls,
        prewhiten=int(bool(prewhiten)),
        target_autocorrelation=float(tests.channel["target_autocorrelation"]),
        note=tests.note,
        **{f"guarantee_{role}": guarantee(role, method, m, design.controls) for role in _ROLES},
    )


def _empty_table(K, size):
    nan = np.full((size, K), np.nan)
    return {
        "members": np.zeros((size, K), dtype=bool),
        "p_value": nan.copy(),
        "q_value": nan.copy(),
        "statistic": nan.copy(),
        "estimate": nan.copy(),
    }


def _store(table, k, fit):
    table["p_value"][:, k] = fit.p_value.reshape(-1)
    table["statistic"][:, k] = fit.statistic.reshape(-1)
    table["estimate"][:, k] = fit.estimate.reshape(-1)


def _test_channels(cf, codes, controls, prewhiten, tables, channel):
    """The p-values of every role and channel, and the channel tests (before selection)."""
    m = cf.Zc.shape[1]
    n_folds = int(cf.fold.max()) + 1
    # an intercept per fold: the response's offsets differ between folds
    intercepts = (cf.fold[:, None] == np.arange(n_folds)).astype(float)
    main = np.column_stack([intercepts, cf.Xc if controls == "full" else cf.subspace, cf.Zc])
    K = cf.gates.shape[1]
    gated = cf.gates * cf.drives  # (n, K): the channels' cross-fitted gated signals

    def ar(residuals):
        # the errors' autocorrelation from the residuals of the model fitted
        # without the sample's fold: in-sample residuals of the regressions
        # below understate it (their many regressors absorb part of it)
        return residual_autocorrelation(residuals, codes) if prewhiten else 0.0

    rho_target = ar(cf.heldout)
    for k in range(K):
        ctrl = np.column_stack([main, np.delete(gated, k, axis=1)])
        projected = cf.projected(cf.residual, k)
        rho = ar(cf.projected(cf.heldout, k))
        p_folds, t_folds = _channel_test(cf, codes, k, projected, rho, gated, controls)
        channel["fold_p_values"][k] = p_folds
        channel["p_value"][k] = _merged_p_value(p_folds)
        channel["statistic"][k] = float(np.median(t_folds))
        channel["autocorrelation"][k] = rho
        # source neuron i: gate * x_i, every source neuron at once; with the
        # bilinear term linearised around the fitted factors, the gate's
        # error (a modulator direction other than c_hat) times the drive is
        # a control, so it cannot leak into the source neurons
        tested = cf.gates[:, [k]] * cf.Xc
        lin = ctrl
        if m > 1:
            lin = np.column_stack([ctrl, cf.drives[:, [k]] * cf.without_pattern("modulator", k)])
        _store(tables["source"], k, clustered_ols(lin, tested, projected, codes, rho))
        # target neuron j: the gated signal in y_j's own regression; with every
        # neuron's main effect among the controls the recorded y_j needs no
        # fold's baseline taken off (the baseline is the same in every fold)
        response = cf.Y if controls == "full" else cf.residual
        fit_t = clustered_ols(ctrl, gated[:, [k]], response, codes, rho_target)
        _store(tables["target"], k, fit_t)
        if m > 1:
            # modulator neuron l: drive * z_l, the source's error linearised likewise
            tested = cf.drives[:, [k]] * cf.Zc
            lin = np.column_stack([ctrl, cf.gates[:, [k]] * cf.without_pattern("source", k)])
            _store(tables["modulator"], k, clustered_ols(lin, tested, projected, codes, rho))
        else:
            tables["modulator"]["p_value"][0, k] = channel["p_value"][k]
            tables["modulator"]["statistic"][0, k] = channel["statistic"][k]
    channel["target_autocorrelation"] = rho_target


def _channel_test(cf, codes, k, projected, rho, gated, controls):
    """Per-fold tests of channel ``k``'s gated signal on the projected target.

    Each fold is tested on its own rows with the factors fitted without them,
    so every per-fold p-value is valid. They are not pooled into one
    regression: without a channel the factors are fits to noise, and those
    of fold ``f`` fit the noise of the folds that fold ``g`` is tested on and
    the other way round, so the folds' statistics are positively correlated
    and a pooled standard error is too small (in simulations without a
    channel a pooled test rejected at 10% in 20-30% of data sets).
    """
    n_folds = int(cf.fold.max()) + 1
    others = np.delete(gated, k, axis=1)
    p_folds, t_folds = np.ones(n_folds), np.zeros(n_folds)
    for f in range(n_folds):
        rows = cf.fold == f
        n_rows = int(rows.sum())
        p, m = cf.Xc.shape[1], cf.Zc.shape[1]
        # every source neuron's main effect where the fold has room for it
        full = controls == "full" and 3 * (2 + p + m + others.shape[1]) <= n_rows
        x_part = cf.Xc[rows] if full else cf.subspace[rows]
        ctrl = np.column_stack([np.ones(n_rows), x_part, cf.Zc[rows], others[rows]])
        fit = clustered_ols(ctrl, gated[rows][:, [k]], projected[rows], codes[rows], rho)
        p_folds[f], t_folds[f] = fit.p_value[0, 0], fit.statistic[0, 0]
    return p_folds, t_folds


def _merged_p_value(p_values, gamma=0.5):
    """Quantile aggregation of p-values, valid under any dependence between them.

    ``min(1, q_gamma(p) / gamma)``, with ``q_gamma`` the smallest value that
    at least a share ``gamma`` of the p-values reach (Meinshausen, Meier &
    Buhlmann, JASA 2009): with ``gamma = 1/2``, twice the median.
    """
    ordered = np.sort(np.asarray(p_values, dtype=float))
    return float(min(1.0, ordered[int(np.ceil(gamma * ordered.size)) - 1] / gamma))


def _select(tables, channel, fdr, method, m):
    """The lists: BY (or BH) per role and channel, for the channels that pass their test."""
    p_channel = np.asarray(channel["p_value"], dtype=float)
    named = np.isfinite(p_channel) & (np.nan_to_num(p_channel, nan=1.0) <= fdr)
    channel["named"] = named
    for k in range(p_channel.size):
        for role in _ROLES:
            t = tables[role]
            if role == "modulator" and m == 1:
                t["q_value"][:, k] = t["p_value"][:, k]
                t["members"][:, k] = named[k]
                continue
            rejected, adjusted = fdr_select(t["p_value"][:, k], fdr, method)
            t["q_value"][:, k] = adjusted
            t["members"][:, k] = rejected & named[k]
