"""Simulated trial-structured recordings: stimulus-locked responses plus fluctuations.

Grating-like experiments repeat a few conditions (directions) many times.
Every population then carries a *stimulus-locked* response (the same in
every trial of a condition) on top of *trial-to-trial fluctuations*; the
communication and modulation of interest live in the fluctuations
(Semedo et al. 2019 subtract condition means first). Here the fluctuations
follow the model of :func:`mics.simulate` (same parameters, returned as its
:class:`~mics.simulation.GroundTruth`), but are AR(1) *within* each trial and
independent across trials; the stimulus-locked parts are shared by source,
modulator (a pupil-like dilation) and target, and the target's includes a
product of the source and modulator responses, so that a model fitted to
the raw data finds communication and modulation that are only stimulus drive.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from mics.simulation.ground_truth import ar1_series, check_autocorr, check_int, simulate

__all__ = ["simulate_trials"]

#: Fraction of the trial before stimulus onset.
_PRE_STIMULUS = 0.25
#: Time constant (in samples) of the stimulus response's rise.
_RISE = 3.0


def _within_trials(rng, n_trials, n_per_trial, n_series, coef):
    """AR(1) series restarted (from a stationary draw) at every trial: (T, n_series)."""
    x = ar1_series(rng, n_per_trial, n_trials * n_series, coef)  # (L, n_trials * n)
    return x.reshape(n_per_trial, n_trials, n_series).transpose(1, 0, 2).reshape(-1, n_series)


def _stimulus_responses(rng, n_conditions, n_per_trial, p, q, m):
    """Condition x time responses of source, modulator and target (unit scale)."""
    t = np.arange(n_per_trial)
    onset = int(round(_PRE_STIMULUS * n_per_trial))
    profile = np.where(t >= onset, 1.0 - np.exp(-(t - onset + 1) / _RISE), 0.0)
    theta = 2 * np.pi * np.arange(n_conditions) / n_conditions
    # (C, L, 3) tuning latents: untuned drive plus direction tuning
    tuning = np.stack([np.ones_like(theta), np.cos(theta), np.sin(theta)], axis=1)
    latents = tuning[:, None, :] * profile[None, :, None]
    x_stim = latents @ rng.standard_normal((3, p))
    # Pupil-like: dilation after onset, weakly direction dependent.
    z_gain = 1.0 + 0.5 * np.cos(theta[:, None] - rng.uniform(0, 2 * np.pi, m))
    z_stim = z_gain[:, None, :] * profile[None, :, None]
    # Target: its own tuning (orientation, outside the source's span) and the
    # product of the source and pupil responses (stimulus drive that a gating
    # channel would mimic).
    orient = np.stack([np.cos(2 * theta), np.sin(2 * theta)], axis=1)
    own = (orient[:, None, :] * profile[None, :, None]) @ rng.standard_normal((2, q))
    product = (latents[..., 1:2] * z_stim[..., :1]) @ rng.standard_normal((1, q))
    linear = latents @ rng.standard_normal((3, q))
    y_stim = own + product + 0.5 * linear
    return x_stim, z_stim, y_stim


def _scale_to(part, variance):
    """Scale a (C, L, n) response so its mean per-column variance is ``variance``."""
    flat = part.reshape(-1, part.shape[-1])
    current = flat.var(axis=0).mean()
    return part * np.sqrt(variance / current) if current > 0 else part


def simulate_trials(
    n_trials=64,
    n_samples_per_trial=20,
    n_conditions=8,
    n_source=20,
    n_target=15,
    n_modulators=2,
    rank=2,
    n_channels=0,
    *,
    stimulus_strength=1.0,
    autocorr=0.7,
    fs=10.0,
    random_state=None,
    **kwargs,
):
    """Simulate repeated trials with stimulus-locked responses and within-trial fluctuations.

    Parameters
    ----------
    n_trials : int
        Trials, assigned to conditions in a balanced random order.
    n_samples_per_trial : int
        Samples per trial (the first quarter before stimulus onset).
    n_conditions : int
        Conditions (e.g. grating directions, evenly spaced in degrees).
    n_source, n_target, n_modulators, rank, n_channels : int
        As in :func:`mics.simulate`, for the fluctuations.
    stimulus_strength : float
        Variance of the stimulus-locked part of each neuron (and modulator)
        relative to its fluctuation variance (the target's noise variance).
        0 gives fluctuations only.
    autocorr : float in (-1, 1)
        Lag-1 autocorrelation within trials of the source, modulator and
        target noise fluctuations (restarted at each trial).
    fs : float
        Sampling rate (Hz) for the ``trial_time`` coordinate.
    random_state : int, RandomState or None
    **kwargs
        Passed to :func:`mics.simulate` (``baseline_snr``, ``modulation_snr``,
        ``additive_snr``, ``geometry``).

    Returns
    -------
    data : xarray.Dataset
        ``X`` (time, source), ``Y`` (time, target), ``Z`` (time, modulator);
        coordinates along time ``trial``, ``trial_time`` (s from onset),
        ``direction`` (degrees) and ``time``; attribute ``fs``.
    truth : GroundTruth
        Parameters of the fluctuation model (``coef_``, channels...). The
        stimulus-locked parts are additive and not in it.
    """
    n_trials = check_int(n_trials, "n_trials", minimum=2)
    L = check_int(n_samples_per_trial, "n_samples_per_trial", minimum=2)
    C = check_int(n_conditions, "n_conditions", minimum=1)
    rho = check_autocorr(autocorr, "autocorr")
    if not np.isfinite(stimulus_strength) or stimulus_strength < 0:
        raise ValueError(f"stimulus_strength must be >= 0, got {stimulus_strength!r}.")
    rng = check_random_state(random_state)
    T = n_trials * L
    # The parameters of mics.simulate, scaled on white data of unit variance;
    # the AR(1) fluctuations below have unit variance too, so the SNRs hold.
    _, _, _, truth = simulate(
        n_samples=T,
        n_source=n_source,
        n_target=n_target,
        n_modulators=n_modulators,
        rank=rank,
        n_channels=n_channels,
        random_state=rng.randint(np.iinfo(np.int32).max),
        **kwargs,
    )
    p, q, m = n_source, n_target, n_modulators
    X = _within_trials(rng, n_trials, L, p, rho)
    Z = _within_trials(rng, n_trials, L, m, rho)
    X -= X.mean(axis=0)
    Z = (Z - Z.mean(axis=0)) / Z.std(axis=0)
    noise = _within_trials(rng, n_trials, L, q, rho)
    Y = truth.predict(X, Z) + noise

    condition = rng.permutation(np.arange(n_trials) % C)
    x_stim, z_stim, y_stim = _stimulus_responses(rng, C, L, p, q, m)
    s = float(stimulus_strength)
    X = X + _scale_to(x_stim, s)[condition].reshape(T, p)
    Z = Z + _scale_to(z_stim, s)[condition].reshape(T, m)
    Y = Y + _scale_to(y_stim, s)[condition].reshape(T, q)

    return _trials_dataset(X, Y, Z, condition, L, C, fs), truth


def _trials_dataset(X, Y, Z, condition, L, n_conditions, fs):
    """The trials as a Dataset along time (coordinates time, trial, trial_time, direction)."""
    import xarray as xr

    n_trials, T = condition.shape[0], X.shape[0]
    trial = np.repeat(np.arange(n_trials), L)
    onset = int(round(_PRE_STIMULUS * L))
    return xr.Dataset(
        {
            "X": (("time", "source"), X),
            "Y": (("time", "target"), Y),
            "Z": (("time", "modulator"), Z),
        },
        coords={
            "time": ("time", np.arange(T) / fs),
            "trial": ("time", trial),
            "trial_time": ("time", np.tile((np.arange(L) - onset) / fs, n_trials)),
            "direction": ("time", (360.0 / n_conditions * condition)[trial]),
            "source": np.arange(X.shape[1]),
            "target": np.arange(Y.shape[1]),
            "modulator": np.arange(Z.shape[1]),
        },
        attrs={"fs": float(fs), "n_trials": n_trials, "n_samples_per_trial": L},
    )
