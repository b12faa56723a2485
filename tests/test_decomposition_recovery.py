"""Issue #5: the fitted decomposition recovers the known kind of modulation.

Every data set has T=1500 samples, p=100 source and q=80 target neurons,
m=3 modulators, a rank r=3 baseline and K=2 channels, and is fitted once per
module with ``MICs(rank=3, n_channels=2, random_state=0)``.

1. Pure geometries: when every channel is of one kind (reshape, private
   source, private target, new), the fitted decomposition names that kind as
   dominant, per channel and for the whole tensor, with a fraction > 0.8.
2. The published finding: when a behavioural state changes *which source
   patterns* interact while the target patterns stay put (private-source
   channels), the communication subspaces of B(z) at the 10th / 90th
   percentile of each modulator keep the target subspace within 15 degrees
   of the baseline one while the source subspace turns by more than 45
   degrees (largest principal angle). A mirrored private-target data set
   must show the opposite, so swapped source/target labels fail.
3. The fitted fractions agree with the truth's own decomposition within 0.1.

BLAS is limited to one thread in this module: on a loaded 2-core machine
OpenBLAS threads oversubscribe the cores and a ~0.15 s fit takes 5-15 s.
The SNR choices are justified by ``studies/validation/decomposition_geometry.py``.
"""

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import mics
from mics.model.decomposition import (
    PARTS,
    decompose,
    modulator_percentiles,
    state_conditioned_subspaces,
)
from mics.simulation.recovery import factor_match_score, match_channels

SIZES = {
    "n_samples": 1500,
    "n_source": 100,
    "n_target": 80,
    "n_modulators": 3,
    "rank": 3,
    "n_channels": 2,
}
GEOMETRIES = ("reshape", "private_source", "private_target", "new")

# Simulator defaults (baseline_snr=1.0, modulation_snr=0.5, additive_snr=0.2)
# and a five times weaker modulation.
DEFAULT_MODULATION_SNR = 0.5
WEAK_MODULATION_SNR = 0.1

# Finding: same total signal (1.5) as the defaults, but the modulation carries
# two thirds of it instead of one third. At the default 1.0 / 0.5 even the TRUE
# B(z) turns the source subspace by < 45 degrees at some percentile state
# (checked below); at 0.5 / 1.0 it turns it by 58-77 degrees (seed 0).
# Even then "every modulator turns it by > 45 deg" is a property of the draw
# (a modulator with small loadings on both channels barely moves B(z)): it
# holds in truth for 5/10 (locomotion) and 7/10 (gaussian) seeds. Seed 0 is one
# of them; over all 30 seeds the fitted angles tracked the true ones within
# 1.5 deg, and the stable side stayed below 7 deg.
FINDING_BASELINE_SNR = 0.5
FINDING_MODULATION_SNR = 1.0
FINDING_SEED = 0
STABLE_DEG, MOVED_DEG = 15.0, 45.0
# The fitted angles must also track the true ones (observed |diff| < 1.5 deg).
ANGLE_TOLERANCE_DEG = 5.0
FRACTION_TOLERANCE = 0.1


def _fit(data):
    X, Y, Z, truth = data
    model = mics.MICs(rank=3, n_channels=2, random_state=0, verbose=0).fit(X, Y, Z)
    return {"Z": Z, "truth": truth, "model": model}


def _fractions(ds, k=None):
    """Per-channel (k) or whole-tensor (k=None) fractions as a dict."""
    if k is None:
        return {part: float(ds[f"total_{part}"]) for part in PARTS}
    return {part: float(ds[part][k]) for part in PARTS}


def _dominant(fractions):
    return max(fractions, key=fractions.get)


def _max_angles(readout):
    """Largest principal angle per state: (source, target), in degrees."""
    return (
        readout["source_angles"].max("angle").values,
        readout["target_angles"].max("angle").values,
    )


# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="module", autouse=True)
def _single_threaded_blas():
    # Results do not depend on it; only the run time does (see module docstring).
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(
    scope="module",
    params=[(g, snr) for snr in (DEFAULT_MODULATION_SNR, WEAK_MODULATION_SNR) for g in GEOMETRIES],
    ids=lambda param: f"{param[0]}-msnr{param[1]}",
)
def pure_fit(request):
    geometry, modulation_snr = request.param
    fit = _fit(
        mics.simulate(**SIZES, geometry=geometry, modulation_snr=modulation_snr, random_state=1)
    )
    fit["geometry"] = geometry
    return fit


# (modulator_kind, geometry, side that must turn): private-source channels are
# the finding; the private-target data set is its mirror (negative control).
FINDING_CASES = [
    ("locomotion", "private_source", "source"),
    ("gaussian", "private_source", "source"),
    ("gaussian", "private_target", "target"),
]


@pytest.fixture(scope="module", params=FINDING_CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def finding_fit(request):
    kind, geometry, moving = request.param
    fit = _fit(
        mics.simulate(
            **SIZES,
            geometry=geometry,
            modulator_kind=kind,
            baseline_snr=FINDING_BASELINE_SNR,
            modulation_snr=FINDING_MODULATION_SNR,
            random_state=FINDING_SEED,
        )
    )
    fit.update(kind=kind, geometry=geometry, moving=moving)
    # 10th / 90th percentile of each modulator in turn, the others at the mean.
    fit["states"] = modulator_percentiles(
        fit["Z"], percentiles=(10, 90), modulator_mean=fit["model"].modulator_mean_
    )
    return fit


# ------------------------------------------------------ 1. pure geometries


def test_pure_geometry_dominates_each_channel_and_the_total(pure_fit):
    """Each channel and the whole tensor are > 80 % of the true kind.

    SNRs: baseline_snr=1.0, additive_snr=0.2 (defaults), modulation_snr=0.5
    (default) or 0.1 (weak); seed 1.
    """
    geometry, model = pure_fit["geometry"], pure_fit["model"]
    assert model.n_channels_ == 2
    ds = model.decompose()
    for k in range(2):
        fractions = _fractions(ds, k)
        assert _dominant(fractions) == geometry, (k, fractions)
        assert fractions[geometry] > 0.8, (k, fractions)
    totals = _fractions(ds)
    assert _dominant(totals) == geometry, totals
    assert totals[geometry] > 0.8, totals


def test_swapping_source_and_target_roles_changes_the_private_label(pure_fit):
    """The check above is not blind to a source/target mix-up: reading the
    same fitted factors with the roles swapped names the mirror kind."""
    geometry, model = pure_fit["geometry"], pure_fit["model"]
    mirror = {"private_source": "private_target", "private_target": "private_source"}
    swapped = decompose(
        {
            "source_subspace_": model.target_subspace_,
            "target_subspace_": model.source_subspace_,
            "source_patterns_": model.target_patterns_,
            "target_patterns_": model.source_patterns_,
            "channel_weights_": model.channel_weights_,
            "modulator_patterns_": model.modulator_patterns_,
        }
    )
    assert _dominant(_fractions(swapped)) == mirror.get(geometry, geometry)


# -------------------------------------------------- 3. agreement with truth


def test_fitted_fractions_match_the_true_decomposition(pure_fit):
    """Per matched channel and in total, every fraction within 0.1 of truth."""
    _assert_fractions_match_truth(pure_fit["truth"], pure_fit["model"])


def _assert_fractions_match_truth(truth, model):
    assert factor_match_score(truth, model) > 0.9
    true_ds, fit_ds = decompose(truth), model.decompose()
    match = match_channels(truth, model)
    assert match.true_index.size == 2
    for i, j in zip(match.true_index, match.estimated_index, strict=True):
        true_f, fit_f = _fractions(true_ds, i), _fractions(fit_ds, j)
        for part in PARTS:
            assert abs(fit_f[part] - true_f[part]) <= FRACTION_TOLERANCE, (i, j, part)
    true_t, fit_t = _fractions(true_ds), _fractions(fit_ds)
    for part in PARTS:
        assert abs(fit_t[part] - true_t[part]) <= FRACTION_TOLERANCE, part


# --------------------------------------------------- 2. the published finding


def test_default_modulation_is_too_weak_for_the_finding_in_truth():
    """Documents the SNR choice: at the simulator defaults (baseline 1.0,
    modulation 0.5) the TRUE source subspace turns by < 45 degrees at some
    percentile state, so the finding is tested at baseline 0.5 / modulation 1.0."""
    for kind in ("locomotion", "gaussian"):
        _, _, Z, truth = mics.simulate(
            **SIZES, geometry="private_source", modulator_kind=kind, random_state=FINDING_SEED
        )
        readout = state_conditioned_subspaces(truth, modulator_percentiles(Z, (10, 90)))
        source, _ = _max_angles(readout)
        assert source.min() < MOVED_DEG, (kind, source)


def test_true_model_shows_the_finding(finding_fit):
    """Precondition: the chosen data (baseline_snr=0.5, modulation_snr=1.0,
    additive_snr=0.2, seed 0) show the finding in the TRUE B(z)."""
    readout = state_conditioned_subspaces(finding_fit["truth"], finding_fit["states"])
    _assert_finding(readout, finding_fit["moving"])


def test_fitted_model_reproduces_the_finding(finding_fit):
    """Fitted B(z) at the 10th / 90th percentile of each modulator: the stable
    side stays within 15 degrees of the fitted baseline subspace, the moving
    side turns by > 45 degrees and tracks the true angles within 5 degrees.
    SNRs: baseline 0.5, modulation 1.0, additive 0.2 (see module docstring)."""
    fitted = state_conditioned_subspaces(finding_fit["model"], finding_fit["states"])
    assert fitted.sizes["state"] == 6  # 3 modulators x 2 percentiles
    _assert_finding(fitted, finding_fit["moving"])
    # The moving side must turn as much as the truth's does. (The stable side is
    # exactly 0 degrees in truth and a few degrees in the fit: fitted patterns
    # leak slightly outside the fitted baseline subspace.)
    true = state_conditioned_subspaces(finding_fit["truth"], finding_fit["states"])
    side = 0 if finding_fit["moving"] == "source" else 1
    np.testing.assert_allclose(
        _max_angles(fitted)[side], _max_angles(true)[side], atol=ANGLE_TOLERANCE_DEG
    )


def _assert_finding(readout, moving):
    source, target = _max_angles(readout)
    moved, stable = (source, target) if moving == "source" else (target, source)
    assert np.all(stable < STABLE_DEG), (moving, source, target)
    assert np.all(moved > MOVED_DEG), (moving, source, target)


def test_finding_data_decompose_as_their_geometry(finding_fit):
    """The finding's fit is also dominated (> 0.8) by its true kind and its
    fractions match the truth's within 0.1."""
    ds = finding_fit["model"].decompose()
    totals = _fractions(ds)
    assert _dominant(totals) == finding_fit["geometry"], totals
    assert totals[finding_fit["geometry"]] > 0.8, totals
    _assert_fractions_match_truth(finding_fit["truth"], finding_fit["model"])
