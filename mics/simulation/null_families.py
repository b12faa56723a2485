"""Trial-structured recordings that depart from the MIC model in one realistic way each.

A test of gating is only as good as its behaviour on data where nothing
gates but the recording is not the model's own: coupling and state drift
together over a session, the target reads the source through a nonlinear
map while the modulator also drives the source, the populations are seen
through a saturating calcium indicator or as spike counts, the modulator is
bursty, or its additive effect lags. :func:`simulate_null_family` draws
such recordings. With ``gate=0`` nothing gates the communication, so a
calibrated test rejects at its nominal rate; ``gate > 0`` adds one true
multiplicative channel of that strength (for power).

Every family shares one skeleton, in the units of the fluctuations
(unit-variance private noise of the target):

- the source is driven by a few shared latent factors (recorded neurons
  share variability) plus private noise, AR(1) within each trial, with a
  per-trial offset;
- the modulator has a trial-level state that persists over trials (AR(1)
  across trials, as arousal and locomotion do) plus within-trial AR(1)
  fluctuations, and it adds to the source along a random direction;
- the target is a rank-``rank`` linear read-out of the source, an additive
  effect of the modulator, private noise and, when ``gate > 0``, one
  channel ``(c . z)(a . x) b``;
- every population and the modulator carry a stimulus-locked response per
  condition (grating direction), which an analysis removes first
  (:func:`mics.preprocessing.subtract_condition_means`).

Each family then changes one thing (see ``FAMILIES``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from sklearn.utils import check_random_state

from mics.simulation.ground_truth import check_int

__all__ = ["FAMILIES", "GATE_KINDS", "SIZES", "simulate_null_family"]

#: Forms of the gate that ``gate > 0`` adds (see :func:`simulate_null_family`).
GATE_KINDS = ("channel", "switch", "threshold")

#: The departures from the model, each a recording in which nothing gates.
FAMILIES = {
    "linear": "the model's own null: linear communication, an additive modulator effect, the "
    "modulator adding to the source",
    "drift": "coupling strength and the modulator's level decline together over the session",
    "nonlinear": "the target reads the source through a nonlinear map (quadratic, softplus or "
    "threshold), and the modulator adds to the source",
    "calcium": "both populations seen through a saturating indicator with a decay kernel; the "
    "modulator adds to both",
    "bursty": "a mostly-zero modulator with heavy-tailed bursts (running)",
    "poisson": "both populations as Poisson counts around rates linear in the source and the "
    "modulator (noise variance grows with the modulator)",
    "lagged": "the modulator's additive effect on the target arrives late (or is nonlinear)",
}

#: Recording sizes of the package's real-data studies: a Park et al. 2024
#: session (128 trials x 49 samples, neurons split in two, pupil and
#: running) and the Semedo et al. 2019 sample (400 trials x 10 bins, 79 V1
#: and 31 V2 neurons, three held-out V1 components as the modulator).
SIZES = {
    "park": dict(n_trials=128, n_samples_per_trial=49, n_source=20, n_target=20, n_modulators=2),
    "semedo": dict(n_trials=400, n_samples_per_trial=10, n_source=79, n_target=31, n_modulators=3),
}

_NONLINEARITIES = ("quadratic", "softplus", "threshold")
_AUTOCORR = 0.7  # lag-1 autocorrelation within trials
_STATE_AUTOCORR = 0.8  # trial-to-trial persistence of the modulator's state
_N_FACTORS = 3  # shared latent factors of the source
_SHARED = 0.5  # share of a source neuron's variance carried by the factors
_BASELINE_SNR = 1.0
_ADDITIVE_SNR = 0.2
_SOURCE_DRIVE = 0.2  # share of the source's variance the modulator adds


def _ar1_trials(rng, n_trials, length, n_series, coef):
    """AR(1) series restarted at each trial from a stationary draw, unit variance: (T, n)."""
    x = np.empty((length, n_trials * n_series))
    x[0] = rng.standard_normal(n_trials * n_series)
    innov = np.sqrt(1 - coef**2)
    for t in range(1, length):
        x[t] = coef * x[t - 1] + innov * rng.standard_normal(n_trials * n_series)
    return x.reshape(length, n_trials, n_series).transpose(1, 0, 2).reshape(-1, n_series)


def _ar1_across(rng, n_trials, n_series, coef):
    """One unit-variance AR(1) value per trial (a state that persists over trials)."""
    s = np.empty((n_trials, n_series))
    s[0] = rng.standard_normal(n_series)
    for i in range(1, n_trials):
        s[i] = coef * s[i - 1] + np.sqrt(1 - coef**2) * rng.standard_normal(n_series)
    return s


def _unit(rng, n):
    v = rng.standard_normal(n)
    return v / np.linalg.norm(v)


def _scaled(part, variance):
    """``part`` scaled so that its variance summed over columns is ``variance`` x columns."""
    current = part.var(axis=0).sum()
    return part * np.sqrt(variance * part.shape[1] / current) if current > 0 else part


def _stimulus(rng, n_conditions, length, n):
    """Condition x time stimulus-locked responses, shape (C, L, n), unit variance."""
    t = np.arange(length)
    onset = length // 4
    profile = np.where(t >= onset, 1.0 - np.exp(-(t - onset + 1) / 3.0), 0.0)
    theta = 2 * np.pi * np.arange(n_conditions) / n_conditions
    tuning = np.stack([np.ones_like(theta), np.cos(theta), np.sin(theta)], axis=1)
    resp = (tuning[:, None, :] * profile[None, :, None]) @ rng.standard_normal((3, n))
    return resp / max(resp.reshape(-1, n).std(axis=0).mean(), 1e-12)


def _modulator(rng, family, n_trials, length, m, options):
    """The modulator's fluctuations (T, m): a persistent trial state plus within-trial noise."""
    state = _ar1_across(rng, n_trials, m, _STATE_AUTOCORR)
    within = _ar1_trials(rng, n_trials, length, m, _AUTOCORR)
    Z = np.repeat(state, length, axis=0) + 0.5 * within
    if family == "drift":
        # The state's level declines over the session (by `trend` state s.d.s).
        s = np.repeat(np.linspace(0.0, 1.0, n_trials), length)
        Z = Z + options["trend"] * (0.5 - s)[:, None] * 2.0
    if family == "bursty":
        # Running: zero in most trials; in a burst trial a heavy-tailed speed
        # with a smooth within-trial time course.
        burst = rng.uniform(size=(n_trials, m)) < options["burst_fraction"]
        amplitude = rng.pareto(options["tail_index"], size=(n_trials, m)) + 1.0
        shape = np.exp(0.3 * _ar1_trials(rng, n_trials, length, m, 0.9))
        Z = np.repeat(burst * amplitude, length, axis=0) * shape
    return Z - Z.mean(axis=0)


def _gate_term(rng, X, Z, q, gate, kind, readout):
    """The gating term, with variance ``gate`` per target neuron, and what defines it.

    ``"channel"``: one channel ``(c . z)(a . x) b``. ``"switch"``: the
    coupling changes to another (full-rank, random) matrix while a modulator
    pattern is above its median, a discrete state switch. ``"threshold"``:
    the baseline read-out gains while the modulator pattern is above its
    70th percentile (a threshold gain).
    """
    p, m = X.shape[1], Z.shape[1]
    c = _unit(rng, m)
    state = Z @ c
    if kind == "channel":
        a, b = _unit(rng, p), _unit(rng, q)
        term = np.outer((state - state.mean()) * (X @ a), b)
        info = dict(source_pattern=a, target_pattern=b)
    else:
        # A state that rises with every modulator (a bursty one is >= 0).
        c = np.abs(c)
        state = Z @ c
        level = np.quantile(state, 0.5 if kind == "switch" else 0.7)
        on = (state > level).astype(float)
        change = rng.standard_normal((p, q)) if kind == "switch" else readout
        term = (on - on.mean())[:, None] * (X @ change)
        info = dict(fraction_on=float(on.mean()))
    term -= term.mean(axis=0)
    term = _scaled(term, gate) if gate > 0 else np.zeros_like(term)
    return term, dict(modulator_pattern=c, **info)


def _nonlinear(u, kind):
    """The target's read-out of a standardised communicated component ``u``."""
    if kind == "quadratic":
        return u + 0.3 * u**2
    if kind == "softplus":
        return np.logaddexp(0.0, 2.0 * u) / 2.0
    return np.maximum(u - 0.5, 0.0)  # threshold


def _indicator(rate, length, tau, half_saturation):
    """Calcium through an exponential decay kernel (within trials) and a saturating indicator."""
    T, n = rate.shape
    calcium = rate.reshape(T // length, length, n).copy()
    decay = np.exp(-1.0 / tau)
    for t in range(1, length):
        calcium[:, t] += decay * calcium[:, t - 1]
    calcium = calcium.reshape(T, n)
    k = half_saturation * np.median(calcium, axis=0)
    return calcium / (calcium + k)


def _lag_within_trials(Z, length, lag):
    """``Z`` delayed by ``lag`` samples inside each trial (the trial's first value held)."""
    T, m = Z.shape
    z = Z.reshape(T // length, length, m)
    out = np.concatenate([np.repeat(z[:, :1], lag, axis=1), z[:, : length - lag]], axis=1)
    return out.reshape(T, m)


def _source_and_modulator(rng, family, n_trials, L, p, m, settings):
    """Source fluctuations (shared factors, private noise, a per-trial offset) and the modulator.

    The modulator adds to the source along one direction per modulator
    (``source_drive`` of the source's variance).
    """
    factors = _ar1_trials(rng, n_trials, L, _N_FACTORS, _AUTOCORR)
    loadings = rng.standard_normal((_N_FACTORS, p))
    X = _scaled(factors @ loadings, _SHARED) + _scaled(
        _ar1_trials(rng, n_trials, L, p, _AUTOCORR), 1 - _SHARED
    )
    X += np.repeat(0.5 * rng.standard_normal((n_trials, p)), L, axis=0)
    Z = _modulator(rng, family, n_trials, L, m, settings)
    drive = settings["source_drive"]
    if drive > 0:
        push = Z @ rng.standard_normal((m, p))
        X = np.sqrt(1 - drive) * _scaled(X, 1.0) + _scaled(push, drive)
    X -= X.mean(axis=0)
    return X, Z


def _observed(rng, family, X, signal, noise, L, settings):
    """What is recorded: the fluctuations, or a calcium indicator of them, or counts."""
    if family == "calcium":
        # The modulator adds to the target's rates too (it already adds to
        # the source's); rates are softplus of the linear model.
        rate_x = np.logaddexp(0.0, X + 0.5)
        rate_y = np.logaddexp(0.0, 0.5 * (signal + noise) + 0.5)
        X = _indicator(rate_x, L, settings["tau"], settings["half_saturation"])
        Y = _indicator(rate_y, L, settings["tau"], settings["half_saturation"])
        X = X + settings["noise"] * rng.standard_normal(X.shape)
        Y = Y + settings["noise"] * rng.standard_normal(Y.shape)
        return X, Y
    if family == "poisson":
        mean = settings["mean_count"]
        X = rng.poisson(np.maximum(mean + X, 0.05)).astype(float)
        # Rates linear in the source's rates and the modulator: the count
        # noise, not a gate, makes the target's variance grow with the state.
        Y = rng.poisson(np.maximum(mean + 0.8 * signal, 0.05)).astype(float)
        return X, Y
    return X, signal + noise


def _check_family_options(family, options):
    defaults = {
        "linear": {},
        "drift": dict(drift=0.6, trend=1.5),
        "nonlinear": dict(nonlinearity="quadratic", source_drive=0.3),
        "calcium": dict(tau=8.0, half_saturation=1.0, noise=0.05),
        "bursty": dict(burst_fraction=0.2, tail_index=1.5),
        "poisson": dict(mean_count=3.0),
        "lagged": dict(lag=3, additive="lagged"),
    }
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}.")
    settings = dict(defaults[family])
    unknown = set(options) - set(settings) - {"source_drive"}
    if unknown:
        raise TypeError(
            f"unknown option(s) {sorted(unknown)} for family {family!r}; "
            f"it takes {sorted(settings)}."
        )
    settings.update(options)
    if family == "nonlinear" and settings["nonlinearity"] not in _NONLINEARITIES:
        raise ValueError(
            f"nonlinearity must be one of {_NONLINEARITIES}, got {settings['nonlinearity']!r}."
        )
    if family == "lagged" and settings["additive"] not in ("lagged", "nonlinear"):
        raise ValueError(
            f"additive must be 'lagged' or 'nonlinear', got {settings['additive']!r}."
        )
    settings.setdefault("source_drive", _SOURCE_DRIVE)
    if not 0 <= settings["source_drive"] < 1:
        raise ValueError(f"source_drive must be in [0, 1), got {settings['source_drive']!r}.")
    return settings


def simulate_null_family(
    family,
    *,
    size="park",
    gate=0.0,
    gate_kind="channel",
    rank=2,
    n_conditions=8,
    stimulus_strength=0.5,
    random_state=None,
    **options,
):
    """Draw a trial-structured recording in which nothing gates, departing from the model one way.

    Parameters
    ----------
    family : {"linear", "drift", "nonlinear", "calcium", "bursty", "poisson", "lagged"}
        The departure (``FAMILIES`` describes each):

        - ``"linear"``: none (the skeleton above: the MIC model's own null,
          with the modulator adding to the source);
        - ``"drift"``: the baseline coupling is multiplied by ``1 + drift (1 - 2 s)``
          over the session position ``s`` in [0, 1], and the modulator's
          level falls by ``trend`` state s.d.s over the same session;
        - ``"nonlinear"``: the target reads each communicated component
          ``u`` through ``nonlinearity`` (``u + 0.3 u**2``, softplus, or a
          threshold), and the modulator adds ``source_drive`` of the
          source's variance;
        - ``"calcium"``: rates (softplus of the linear model, the modulator
          adding to both populations) pass a within-trial exponential kernel
          of time constant ``tau`` samples and a saturating indicator
          ``c / (c + half_saturation * median(c))``, plus noise;
        - ``"bursty"``: each modulator is zero outside a fraction
          ``burst_fraction`` of trials, with Pareto(``tail_index``) burst
          amplitudes;
        - ``"poisson"``: both populations are Poisson counts of mean about
          ``mean_count`` around rates linear in the source and the modulator
          (no gate in the mean; the count noise grows with the modulator);
        - ``"lagged"``: the modulator's additive effect on the target arrives
          ``lag`` samples late (``additive="lagged"``), or is quadratic in
          the modulator (``additive="nonlinear"``).
    size : {"park", "semedo"} or dict
        Recording size (``SIZES``), or a dict with ``n_trials``,
        ``n_samples_per_trial``, ``n_source``, ``n_target``, ``n_modulators``.
    gate : float
        Strength of one true multiplicative channel: the variance it adds per
        target neuron, relative to the target's private noise variance (as
        ``modulation_snr`` of :func:`mics.simulate`). 0: no gating.
    gate_kind : {"channel", "switch", "threshold"}
        The gate's form: one multiplicative interaction channel (the MIC
        model's own), a discrete switch of the whole coupling to another
        random matrix while a modulator pattern is above its median, or a
        gain of the baseline read-out while it is above its 70th percentile
        (gating that is not a CP channel).
    rank : int
        Rank of the linear read-out of the source by the target.
    n_conditions : int
        Stimulus conditions (grating directions), balanced over trials.
    stimulus_strength : float
        Variance of the stimulus-locked responses relative to the fluctuations.
    random_state : int, RandomState or None
    **options
        The family's settings named above (and ``source_drive`` for every
        family: the share of the source's variance the modulator adds).

    Returns
    -------
    data : xarray.Dataset
        ``X`` (time, source), ``Y`` (time, target), ``Z`` (time, modulator)
        with coordinates ``trial``, ``trial_time``, ``direction`` along time;
        attributes ``family``, ``gate`` and the family's settings.
    truth : dict
        ``family``, ``gate``, ``settings``, ``gate_fraction`` (the share of
        the target's fluctuation variance the channel carries, in the units
        of :attr:`mics.workflows.inference.ModulationTest.effect_size`), and
        with ``gate > 0`` the gate's ``modulator_pattern`` and, for a
        channel, its ``source_pattern`` and ``target_pattern`` (unit norm).

    Examples
    --------
    >>> data, truth = simulate_null_family("drift", random_state=0)
    >>> dict(data.sizes)
    {'time': 6272, 'source': 20, 'target': 20, 'modulator': 2}
    """
    settings = _check_family_options(family, options)
    n_trials, L, p, q, m, rank = _check_recording(size, rank, gate, gate_kind)
    rng = check_random_state(random_state)
    X, Z = _source_and_modulator(rng, family, n_trials, L, p, m, settings)
    target = _target(
        rng, family, X, Z, L, settings, q=q, rank=rank, gate=float(gate), gate_kind=gate_kind
    )
    X, Y = _observed(rng, family, X, target.signal, target.noise, L, settings)
    X, Y, Z, condition = _with_stimulus(
        rng, (X, Y, Z), n_trials, L, n_conditions, stimulus_strength
    )
    attrs = {"family": family, "gate": float(gate), "gate_kind": gate_kind, **settings}
    data = _recording(X, Y, Z, condition, L, n_conditions, attrs)
    truth = dict(
        family=family,
        gate=float(gate),
        gate_kind=gate_kind,
        settings=settings,
        gate_fraction=target.gate_fraction,
    )
    if gate > 0:
        truth.update(target.channel)
    return data, truth


def _check_recording(size, rank, gate, gate_kind):
    """Check the recording's size, rank and gate: ``(n_trials, L, p, q, m, rank)``."""
    dims = SIZES[size] if isinstance(size, str) and size in SIZES else size
    if not isinstance(dims, dict):
        raise ValueError(f"size must be one of {sorted(SIZES)} or a dict, got {size!r}.")
    n_trials = check_int(dims["n_trials"], "n_trials", minimum=4)
    L = check_int(dims["n_samples_per_trial"], "n_samples_per_trial", minimum=4)
    p = check_int(dims["n_source"], "n_source", minimum=2)
    q = check_int(dims["n_target"], "n_target", minimum=2)
    m = check_int(dims["n_modulators"], "n_modulators", minimum=1)
    rank = check_int(rank, "rank", minimum=1)
    if not (np.isfinite(gate) and gate >= 0):
        raise ValueError(f"gate must be a finite number >= 0, got {gate!r}.")
    if gate_kind not in GATE_KINDS:
        raise ValueError(f"gate_kind must be one of {GATE_KINDS}, got {gate_kind!r}.")
    return n_trials, L, p, q, m, rank


class _Target(NamedTuple):
    """The target's parts before observation, and what defines the gate."""

    signal: np.ndarray
    noise: np.ndarray
    gate_fraction: float
    channel: dict


def _target(rng, family, X, Z, L, settings, *, q, rank, gate, gate_kind):
    """Linear read-out of the source, additive effect of the modulator, gate and private noise.

    ``X`` and ``Z`` hold whole trials of ``L`` samples.
    """
    p, m = X.shape[1], Z.shape[1]
    n_trials = X.shape[0] // L
    U = np.linalg.qr(rng.standard_normal((p, rank)))[0]
    V = np.linalg.qr(rng.standard_normal((q, rank)))[0]
    u = X @ U
    u = (u - u.mean(axis=0)) / u.std(axis=0)
    if family == "nonlinear":
        u = _nonlinear(u, settings["nonlinearity"])
    if family == "drift":
        s = np.repeat(np.linspace(0.0, 1.0, n_trials), L)
        u = u * (1.0 + settings["drift"] * (1.0 - 2.0 * s))[:, None]
    communicated = _scaled(u @ V.T, _BASELINE_SNR)
    z_add = Z
    if family == "lagged":
        if settings["additive"] == "lagged":
            z_add = _lag_within_trials(Z, L, int(settings["lag"]))
        else:
            z_add = (Z - Z.mean(axis=0)) ** 2
    additive = _scaled(z_add @ rng.standard_normal((m, q)), _ADDITIVE_SNR)
    gated, channel = _gate_term(rng, X, Z, q, gate, gate_kind, U @ V.T)
    noise = _ar1_trials(rng, n_trials, L, q, _AUTOCORR)
    signal = communicated + additive + gated
    gate_fraction = float(gated.var(axis=0).sum() / (signal + noise).var(axis=0).sum())
    return _Target(signal, noise, gate_fraction, channel)


def _with_stimulus(rng, arrays, n_trials, L, n_conditions, strength):
    """The arrays plus a stimulus-locked response per condition, and each trial's condition."""
    condition = rng.permutation(np.arange(n_trials) % n_conditions)
    out = []
    for arr in arrays:
        resp = _stimulus(rng, n_conditions, L, arr.shape[1])
        scale = np.sqrt(strength) * arr.std(axis=0)
        out.append(arr + (resp[condition] * scale).reshape(n_trials * L, -1))
    return (*out, condition)


def _recording(X, Y, Z, condition, L, n_conditions, attrs):
    """The recording as a Dataset along time, with its trial, time and direction coordinates."""
    import xarray as xr

    n_trials = condition.shape[0]
    trial = np.repeat(np.arange(n_trials), L)
    return xr.Dataset(
        {
            "X": (("time", "source"), X),
            "Y": (("time", "target"), Y),
            "Z": (("time", "modulator"), Z),
        },
        coords={
            "trial": ("time", trial),
            "trial_time": ("time", np.tile(np.arange(L) - L // 4, n_trials)),
            "direction": ("time", (360.0 / n_conditions * condition)[trial]),
            "source": np.arange(X.shape[1]),
            "target": np.arange(Y.shape[1]),
            "modulator": np.arange(Z.shape[1]),
        },
        attrs=attrs,
    )
