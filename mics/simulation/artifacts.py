"""Defects and valid heavy tails, for testing the data-quality checks.

:func:`inject_artifacts` plants what recordings suffer from (motion-artifact
frames on every neuron of a population, one neuron's corrupt sample, an
encoder glitch in the modulator) into copies of clean data, and says where.
:func:`running_speed` and :func:`calcium_events` draw what recordings
legitimately look like and the checks must leave alone: running that is
mostly zero with bursts of heavy-tailed speed, and sparse calcium
transients that rise in one sample and decay over several.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import signal
from sklearn.utils import check_random_state

__all__ = ["DEFECTS", "InjectedArtifacts", "calcium_events", "inject_artifacts", "running_speed"]

#: What :func:`inject_artifacts` plants: ``(role, kind)``.
DEFECTS = {
    "X frame": ("X", "frame"),
    "Y frame": ("Y", "frame"),
    "X sample": ("X", "sample"),
    "Y sample": ("Y", "sample"),
    "Z glitch": ("Z", "sample"),
}


@dataclass
class InjectedArtifacts:
    """Where :func:`inject_artifacts` planted its defects.

    Attributes
    ----------
    defect : str
        A key of :data:`DEFECTS`.
    samples : ndarray of int
        The defective samples, sorted.
    columns : ndarray of int
        Per defective sample, the column it hit (-1 for a frame: every column).
    sizes : ndarray of float
        Per defective sample, the signed size in standard deviations of the
        column(s) (the clean data's).
    """

    defect: str
    samples: np.ndarray
    columns: np.ndarray
    sizes: np.ndarray


def inject_artifacts(X, Y, Z, defect, *, count=1, size=100.0, random_state=None):
    """Copies of ``X``, ``Y``, ``Z`` with defects planted at random samples.

    Parameters
    ----------
    X : ndarray of shape (n_samples, p)
    Y : ndarray of shape (n_samples, q)
    Z : ndarray of shape (n_samples, m)
    defect : str
        One of :data:`DEFECTS`: ``"X frame"`` / ``"Y frame"`` add ``size``
        standard deviations of each neuron to every neuron of a population
        at a sample (one sign per frame, as motion or flicker moves every
        trace one way); ``"X sample"`` / ``"Y sample"`` add them to one
        neuron; ``"Z glitch"`` to one modulator column.
    count : int
        Defective samples (distinct, anywhere in the recording).
    size : float or array-like of shape (count,)
        Sizes in standard deviations of the clean column(s); signs are drawn.
    random_state : int or RandomState

    Returns
    -------
    X, Y, Z : ndarray
        The defective copies.
    truth : InjectedArtifacts
    """
    if defect not in DEFECTS:
        raise ValueError(f"defect must be one of {list(DEFECTS)}, got {defect!r}.")
    rng = check_random_state(random_state)
    arrays = {
        "X": np.array(X, dtype=float),
        "Y": np.array(Y, dtype=float),
        "Z": np.array(Z, dtype=float).reshape(len(Z), -1),
    }
    role, kind = DEFECTS[defect]
    target = arrays[role]
    n, k = target.shape
    if not 1 <= count <= n:
        raise ValueError(f"count must lie in [1, {n}], got {count!r}.")
    sd = target.std(axis=0)
    samples = np.sort(rng.choice(n, size=count, replace=False))
    sizes = np.broadcast_to(np.asarray(size, dtype=float), (count,)) * rng.choice([-1, 1], count)
    if kind == "frame":
        columns = np.full(count, -1)
        target[samples] += sizes[:, None] * sd
    else:
        columns = rng.randint(k, size=count)
        target[samples, columns] += sizes * sd[columns]
    truth = InjectedArtifacts(defect, samples, columns, np.asarray(sizes, dtype=float))
    return arrays["X"], arrays["Y"], arrays["Z"], truth


def running_speed(
    n_samples,
    *,
    p_start=0.01,
    p_stop=0.08,
    min_bout=3,
    speed_sd=0.8,
    jitter_sd=0.3,
    smooth=0.5,
    random_state=None,
):
    """Running speed that is mostly zero, with bouts of heavy-tailed speed.

    Bouts start with probability ``p_start`` per still sample and last
    ``min_bout`` samples plus a geometric number (mean ``1 / p_stop``);
    each bout runs at a lognormal speed (log-SD ``speed_sd``) that jitters
    from sample to sample (log-SD ``jitter_sd``), and a one-pole filter
    (coefficient ``smooth``) gives the acceleration and deceleration of a
    wheel or treadmill encoder. With the defaults about 85% of samples are
    zero, as in the Park et al. (2024) recordings.

    Parameters
    ----------
    n_samples : int
    p_start, p_stop : float
    min_bout : int
    speed_sd, jitter_sd : float
    smooth : float in [0, 1)
        0: speed jumps at a bout's edges.
    random_state : int or RandomState

    Returns
    -------
    speed : ndarray of shape (n_samples,)
        Non-negative.
    """
    rng = check_random_state(random_state)
    level = np.zeros(n_samples)
    t, running = int(rng.geometric(p_start)), True
    while t < n_samples:
        length = (
            int(rng.geometric(p_stop)) + min_bout - 1 if running else int(rng.geometric(p_start))
        )
        if running:
            level[t : t + length] = np.exp(speed_sd * rng.standard_normal())
        t += length
        running = not running
    speed = level * np.exp(jitter_sd * rng.standard_normal(n_samples))
    if smooth:
        speed = signal.lfilter([1 - smooth], [1.0, -smooth], speed)
    return speed


def calcium_events(
    n_samples,
    n_columns=1,
    *,
    rate=0.02,
    tau_samples=8.0,
    amplitude_sd=0.7,
    noise=0.05,
    random_state=None,
):
    """Sparse calcium transients: a one-sample rise and an exponential decay, plus noise.

    Parameters
    ----------
    n_samples, n_columns : int
    rate : float
        Events per sample per column.
    tau_samples : float
        Decay time constant in samples (indicator decay time x sampling rate).
    amplitude_sd : float
        Log-SD of the lognormal event amplitudes.
    noise : float
        Gaussian noise s.d. relative to each trace's s.d.
    random_state : int or RandomState

    Returns
    -------
    traces : ndarray of shape (n_samples, n_columns)
    """
    rng = check_random_state(random_state)
    events = (rng.random_sample((n_samples, n_columns)) < rate) * np.exp(
        amplitude_sd * rng.standard_normal((n_samples, n_columns))
    )
    decay = np.exp(-1.0 / tau_samples)
    traces = signal.lfilter([1.0], [1.0, -decay], events, axis=0)
    return traces + noise * traces.std(axis=0) * rng.standard_normal(traces.shape)
