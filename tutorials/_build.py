"""Generate the tutorial notebooks from the cell sources below.

The notebooks are written without outputs so that they stay reviewable in a
diff; edit this file, not the ``.ipynb`` files, and regenerate with::

    python tutorials/_build.py

``tests/test_tutorials.py`` executes both notebooks top to bottom.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat import v4

HERE = Path(__file__).resolve().parent

METADATA = {
    "kernelspec": {
        "display_name": "Python 3 (ipykernel)",
        "language": "python",
        "name": "python3",
    },
    "language_info": {"name": "python"},
}


def md(text: str):
    return v4.new_markdown_cell(text.strip("\n"))


def code(text: str):
    return v4.new_code_cell(text.strip("\n"))


# --------------------------------------------------------------------------------------
# 01: recovery of known channels from simulated data
# --------------------------------------------------------------------------------------

SIMULATED = [
    md(
        """
# 1. Recovering known channels from simulated data

`mics` fits *multiplicative interaction channels* (MICs): a source pattern `a`,
a target pattern `b` and a modulator pattern `c` such that the modulator
state `c . z` gates how strongly `a . x` drives `b . y`, on top of the
baseline communication subspace of reduced-rank regression (see
`docs/model.md`).

Here we simulate a recording whose channels we know, fit `mics.MICs()` with
the baseline rank and the number of channels chosen by blocked
cross-validation, and check what comes back against the truth. The
channels have the **private-source** geometry: the modulator recruits source
patterns that lie *outside* the baseline communication subspace while the
target patterns stay inside the baseline target subspace.

The sizes are kept small (T = 1500 time bins, p = 40 source neurons,
q = 30 target neurons, m = 3 modulators) so that the notebook runs in well
under a minute.
"""
    ),
    code(
        """
import time

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr

import mics
from mics import plotting
from mics.decomposition import (
    decompose,
    format_decomposition,
    modulator_percentiles,
    state_conditioned_subspaces,
    summarize,
)
from mics.recovery import factor_match_score, match_channels, subspace_angles_deg

np.set_printoptions(precision=3, suppress=True)
"""
    ),
    md(
        """
## Simulate

`mics.simulate` returns source `X` (T x p), target `Y` (T x q), modulator `Z`
(T x m, z-scored) and a `GroundTruth` whose attributes have the same names as
a fitted model (`rank_`, `channel_weights_`, `source_patterns_`, ...). The
true model has a rank-3 baseline and two channels, both private-source.
Sources and modulator are autocorrelated, as calcium signals are; this is
why every resampling in `mics` keeps contiguous blocks of time.
"""
    ),
    code(
        """
X, Y, Z, truth = mics.simulate(
    n_samples=1500,
    n_source=40,
    n_target=30,
    n_modulators=3,
    rank=3,
    n_channels=2,
    geometry="private_source",
    source_autocorr=0.5,
    modulator_autocorr=0.9,
    random_state=0,
)
print(X.shape, Y.shape, Z.shape)
truth
"""
    ),
    md(
        """
## Fit with cross-validated selection

`rank=None` and `n_channels=None` (the defaults) select both by contiguous
10-fold cross-validation with the one-SEM rule: first the baseline rank,
then the number of channels given that rank (0 would mean "no modulation").
We cap the candidates (`max_rank=6`, `max_channels=3`) to keep it quick.

During selection the candidate fits run a capped number of sweeps, so a
`ConvergenceWarning` may appear; it concerns the comparison of candidates,
not the final fit (see `model.converged_`).
"""
    ),
    code(
        """
t0 = time.perf_counter()
model = mics.MICs(max_rank=6, max_channels=3, random_state=0, verbose=0).fit(X, Y, Z)
print(f"fit with selection in {time.perf_counter() - t0:.1f} s")
print(f"selected rank {model.rank_} (true {truth.rank_}), "
      f"channels {model.n_channels_} (true {truth.n_channels_}), "
      f"converged: {model.converged_}")
print("channel weights:", model.channel_weights_, " true:", truth.channel_weights_)
"""
    ),
    md(
        """
The cross-validation curves: performance is `1 - NSE` (normalised squared
error pooled over target neurons) with a one-SEM band; the star marks the
selected candidate, the smallest within one SEM of the best.
"""
    ),
    code(
        """
plotting.plot_cv_curves(model);
"""
    ),
    md(
        """
## The channels

Each row is one channel: its source, target and modulator patterns (unit
norm; the sign of a channel lives in its modulator pattern).
"""
    ),
    code(
        """
plotting.plot_channels(model);
"""
    ),
    md(
        """
## Compare with the truth

The *factor match score* matches estimated to true channels (Hungarian
algorithm on the product of |cosines| of the three patterns) and averages
the matched similarities; 1 is perfect, and a missed or spurious channel
counts as 0. We also compare the baseline subspaces by their principal
angles (0 degrees = the same direction).
"""
    ),
    code(
        """
fms = factor_match_score(truth, model)
match = match_channels(truth, model)
print(f"factor match score: {fms:.3f}")
print("per matched channel |cos| (source, target, modulator):")
print(match.cosines)
src_angles = subspace_angles_deg(truth.source_subspace_, model.source_subspace_)
tgt_angles = subspace_angles_deg(truth.target_subspace_, model.target_subspace_)
print("source subspace angles to truth (deg):", src_angles)
print("target subspace angles to truth (deg):", tgt_angles)
"""
    ),
    md(
        """
## Decomposition: what kind of modulation is it?

Each channel is split by projecting its source pattern onto the baseline
source subspace or its complement, and its target pattern onto the baseline
target subspace or its complement: **reshape** (both inside), **private
source**, **private target**, **new** (both outside). The fractions of each
channel sum to one; `total_*` are the fractions of the whole modulation
tensor's energy.
"""
    ),
    code(
        """
dec = model.decompose()
print(format_decomposition(dec))
print()
print(summarize(dec))
print()
print("truth:", summarize(decompose(truth)))
"""
    ),
    code(
        """
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
plotting.plot_decomposition(dec, ax=axes[0])
plotting.plot_geometry(model, ax=axes[1]);
"""
    ),
    md(
        """
## State-conditioned communication

At a modulator state `z` the effective communication matrix is
`B(z) = B + sum_k lambda_k (c_k . z) a_k b_k^T` (`model.communication_matrix(z)`).
We set each modulator in turn to its 10th and 90th percentile (the others at
their mean) and measure the principal angles between the top-r subspaces of
`B(z)` and the baseline subspaces. Private-source modulation rotates the
**source** subspace while the target subspace barely moves; the truth gives
the reference.
"""
    ),
    code(
        """
states = modulator_percentiles(Z, (10, 90), modulator_mean=model.modulator_mean_)
readout = state_conditioned_subspaces(model, states)
readout_true = state_conditioned_subspaces(truth, states)
largest = {
    "source": readout.source_angles.max("angle"),
    "source (truth)": readout_true.source_angles.max("angle"),
    "target": readout.target_angles.max("angle"),
    "target (truth)": readout_true.target_angles.max("angle"),
}
print("largest principal angle to the baseline subspace (degrees)")
print(xr.Dataset(largest).to_dataframe().round(1))
low, high = states["z0_p10"], states["z0_p90"]
change = np.linalg.norm(model.communication_matrix(high) - model.communication_matrix(low))
print(f"||B(z0 at p90) - B(z0 at p10)||_F = {change:.3f}")
"""
    ),
    md(
        """
## Sanity checks

These assertions make executing the notebook a test (see
`tests/test_tutorials.py`).
"""
    ),
    code(
        """
assert model.rank_ >= 1 and model.n_channels_ >= 1
assert model.converged_
assert fms > 0.8, fms
assert float(dec["total_private_source"]) > 0.5
assert np.isclose(sum(float(dec[f"total_{p}"]) for p in
                      ("reshape", "private_source", "private_target", "new")), 1.0)
assert (readout.source_angles.max() > readout.target_angles.max()).item()
print("all checks passed")
"""
    ),
]


# --------------------------------------------------------------------------------------
# 02: real recordings
# --------------------------------------------------------------------------------------

REAL = [
    md(
        """
# 2. Real recordings

Two public data sets from the shared data folder:

* **(a) Semedo et al. 2019** (macaque V1 and V2, Utah arrays): reduced-rank
  regression finds fewer predictive dimensions for V1 -> V2 than for
  V1 -> V1 (the paper's central result), then a MIC fit with a third
  population (held-out V1 neurons) as the modulator.
* **(b) Park et al. 2024** (mouse V1, two-photon): one population with pupil
  size and running speed; a MIC fit with pupil and speed as the modulator.

**Where the data come from.** The notebook reads `$MICS_DATA_DIR` if it is
set, and otherwise `../../shared/data` relative to this notebook (i.e. a
`shared/data` folder next to the repository). The recordings are not part of
the package; see `shared/data/README.md` for their sources and licences.

**These are demonstrations of the workflow, not findings.** Ranks are fixed
small, the permutation test runs only a handful of shifts, and in (b) the
"source" and "target" are an arbitrary split of one V1 population.
"""
    ),
    code(
        """
import os
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import scipy.io

import mics
from mics import plotting
from mics.decomposition import format_decomposition, summarize

np.set_printoptions(precision=3, suppress=True)

DATA = Path(os.environ.get("MICS_DATA_DIR") or Path.cwd() / ".." / ".." / "shared" / "data")
DATA = DATA.resolve()
if not DATA.is_dir():
    raise FileNotFoundError(
        f"no shared data folder at {DATA}: set MICS_DATA_DIR to the folder holding "
        "semedo2019/ and park2024/"
    )
print("data folder:", DATA)
"""
    ),
    md(
        """
## (a) V1 -> V2 communication subspace (Semedo et al. 2019)

`X` holds 79 V1 neurons, `Y_V2` 31 V2 neurons and `Y_V1` 31 *other* V1
neurons, 4000 samples (400 trials x 10 bins, stimulus means subtracted).
`mics.ReducedRankRegressionCV` selects the rank by contiguous 10-fold
cross-validation and the one-SEM rule, as in the reference code.
"""
    ),
    code(
        """
mat = scipy.io.loadmat(DATA / "semedo2019" / "sample_data.mat")
X_v1, Y_v2, Y_v1 = mat["X"], mat["Y_V2"], mat["Y_V1"]
print("V1 source", X_v1.shape, " V2 target", Y_v2.shape, " held-out V1", Y_v1.shape)

t0 = time.perf_counter()
rrr_v2 = mics.ReducedRankRegressionCV(ranks=range(11), cv=10).fit(X_v1, Y_v2)
rrr_v1 = mics.ReducedRankRegressionCV(ranks=range(11), cv=10).fit(X_v1, Y_v1)
print(f"cross-validated in {time.perf_counter() - t0:.1f} s")
print(f"V1 -> V2: {rrr_v2.rank_} predictive dimensions;  V1 -> V1: {rrr_v1.rank_}")
"""
    ),
    code(
        """
fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
for rrr, label in ((rrr_v2, "V1 -> V2"), (rrr_v1, "V1 -> V1")):
    res = rrr.cv_results_
    ax.errorbar(res["rank"], res["mean_score"], yerr=res["sem_loss"], marker="o", label=label)
    ax.axvline(rrr.rank_, linestyle="--", color=ax.lines[-1].get_color())
ax.set_xlabel("rank")
ax.set_ylabel("CV performance (1 - NSE)")
ax.legend();
"""
    ),
    md(
        """
### A third population as the modulator (demonstration)

Does activity in the held-out V1 neurons gate the V1 -> V2 interaction? As a
multivariate modulator we take the top 3 principal components of `Y_V1`
(a "third population" summarised by its main patterns). We fix the baseline
rank at the V1 -> V2 rank selected above and fit **one** channel: fixed
small ranks, chosen for the demonstration, not selected.
"""
    ),
    code(
        """
Y_v1_centred = Y_v1 - Y_v1.mean(axis=0)
_, _, Vt = np.linalg.svd(Y_v1_centred, full_matrices=False)
Z_pcs = Y_v1_centred @ Vt[:3].T  # (T, 3) held-out V1 principal components

mic_v2 = mics.MICs(rank=rrr_v2.rank_, n_channels=1, random_state=0, verbose=0)
mic_v2.fit(X_v1, Y_v2, Z_pcs)
print("channel weight:", mic_v2.channel_weights_)
print("modulator pattern over the 3 PCs:", mic_v2.modulator_patterns_[:, 0])
print(f"training 1 - NSE: MIC {mic_v2.score(X_v1, Y_v2, Z_pcs):.4f}  vs  "
      f"reduced-rank regression {rrr_v2.score(X_v1, Y_v2):.4f}")
dec_v2 = mic_v2.decompose()
print(format_decomposition(dec_v2))
print(summarize(dec_v2))
"""
    ),
    md(
        """
The training score only shows that the fit ran; whether the channel
generalises is what cross-validated selection (`n_channels=None`) and
`mics.test_modulation` decide, as in part (b).

## (b) One V1 population with pupil and running (Park et al. 2024)

`mics.io.load_park2024` reads one session into an `xarray.Dataset`:
`activity` (time x neuron, 128 trials x 49 samples at 16 Hz concatenated),
`pupil` (z-scored pupil size) and `speed` (running speed), with `trial`,
`trial_time` and `direction` coordinates.
"""
    ),
    code(
        """
ds = mics.io.load_park2024(DATA / "park2024" / "230809_mrcuts28_fov4_grat-000_data.mat")
ds
"""
    ),
    md(
        """
**Demonstration split.** The recording has a single population, so we split
its neurons into two arbitrary groups (even and odd positions) and call one
the "source" and the other the "target". This is only to show the workflow:
the groups are not anatomically distinct populations, and the stimulus
drive they share is not removed here.

`mics.io.build_inputs` selects the groups by a neuron coordinate, stacks
pupil and speed into the modulator `Z` and, with `dropna=True`, drops time
points where any of them is NaN (behaviour gaps; this session has none, but
other recordings do). Each column is then z-scored.
"""
    ),
    code(
        """
group = np.where(np.arange(ds.sizes["neuron"]) % 2 == 0, "A", "B")
ds = ds.assign_coords(group=("neuron", group))
X, Y, Z = mics.io.build_inputs(
    ds,
    source={"group": "A"},
    target={"group": "B"},
    modulators=["pupil", "speed"],
    dropna=True,
)
print("NaN time points dropped:", X.attrs.get("n_dropped_nan", 0))
X, Y, Z = (mics.preprocessing.zscore(a) for a in (X, Y, Z))
print("source", X.shape, " target", Y.shape, " modulator", Z.shape,
      list(Z.modulator.values))
"""
    ),
    md(
        """
Fit with small fixed ranks (baseline rank 2, one channel). The inputs are
labelled `xarray` objects, so the patterns come back labelled with neuron
ids and modulator names.
"""
    ),
    code(
        """
mic_park = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
print("channel weight:", mic_park.channel_weights_)
print(mic_park.modulator_patterns_.to_series())
plotting.plot_channels(mic_park);
"""
    ),
    md(
        """
### Is there modulation at all? (too few permutations for a claim)

`mics.test_modulation` compares the cross-validated improvement of the
selected model over the baseline-plus-additive-modulator model with its
distribution under circular shifts of `Z` (which keep every
autocorrelation). Here it runs only **5** shifts to stay quick, so the
smallest attainable p-value is 1/6: **far too few for a real claim**; use
hundreds. The minimum shift is 10 trials (490 samples), longer than the
slow fluctuations of pupil and running within a trial. Each null fit runs
the channel selection, whose capped candidate fits may print
`ConvergenceWarning`s.
"""
    ),
    code(
        """
t0 = time.perf_counter()
test = mics.test_modulation(
    mics.MICs(rank=2, max_channels=2, cv=8, random_state=0, verbose=0),
    X, Y, Z,
    n_permutations=5,
    min_shift=10 * ds.attrs["n_samples_per_trial"],
    n_jobs=2,
    random_state=0,
    verbose=0,
)
print(f"{time.perf_counter() - t0:.1f} s:", test)
print("null improvements:", test.null_distribution)
if test.n_channels == 0:
    print(
        "Cross-validation keeps no channel on the real alignment, so the one-channel "
        "fit above is not supported by these data: it illustrates the workflow only."
    )
"""
    ),
    md(
        """
### Decomposition of the demonstration fit
"""
    ),
    code(
        """
dec_park = mic_park.decompose()
print(format_decomposition(dec_park))
print(summarize(dec_park))
fig, axes = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
plotting.plot_decomposition(dec_park, ax=axes[0])
plotting.plot_geometry(mic_park, ax=axes[1]);
"""
    ),
    md(
        """
## Sanity checks
"""
    ),
    code(
        """
parts = ("reshape", "private_source", "private_target", "new")
assert rrr_v2.rank_ < rrr_v1.rank_, "V1->V2 should need fewer dimensions than V1->V1"
assert mic_v2.rank_ == rrr_v2.rank_ and mic_v2.n_channels_ == 1
assert mic_park.rank_ == 2 and mic_park.n_channels_ == 1
for d in (dec_v2, dec_park):
    assert np.isclose(sum(float(d[f"total_{p}"]) for p in parts), 1.0)
assert X.shape[0] == Y.shape[0] == Z.shape[0] and Z.shape[1] == 2
assert 0 < test.p_value <= 1 and test.null_distribution.size == 5
print("all checks passed")
"""
    ),
]


NOTEBOOKS = {
    "01_simulated_recovery.ipynb": SIMULATED,
    "02_real_recordings.ipynb": REAL,
}


def build(folder: Path = HERE) -> list[Path]:
    """Write the notebooks (no outputs) into ``folder`` and return their paths."""
    paths = []
    for name, cells in NOTEBOOKS.items():
        nb = v4.new_notebook(cells=cells, metadata=METADATA)
        for index, cell in enumerate(nb.cells):
            cell.id = f"{name[:2]}-{index:02d}"  # stable ids keep regenerated diffs clean
        nbformat.validate(nb)
        path = folder / name
        nbformat.write(nb, path)
        paths.append(path)
    return paths


if __name__ == "__main__":
    for path in build():
        print("wrote", path)
