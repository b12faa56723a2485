"""Golden values of ``mics``: results frozen at one commit, so a change that is not
meant to change a result provably changes none.

The ``*.npz`` files next to this script hold results of the code at commit
``f9fe0bf`` (``GOLDEN_COMMIT``) and ``tests/test_golden.py`` checks that the
code under test reproduces them: a reorganisation that changes no
computation changes no value.

History: the values were first frozen at ``ca89bfb``, the last commit of the
flat layout, and the restructure into subpackages (issue 30, up to
``f0c3360``) reproduced every group bit for bit. ``da3df9e`` then changed
the fits on purpose (issue 31: a line search in the ALS, one sweep cap):
the same selections and false-positive rate, test statistics within a few
1e-4 (``benchmarks/README.md``, "Convergence where there is nothing to
find"), so the values were regenerated
there. ``f4968b5`` (data-path sweeps reuse their products; the line-search
step's target Gram from the interaction columns) changed one group,
``selection_data``, by round-off (1.0e-16 relative), and ``a637d44`` (the
Grams' means from the cross scatter) moved it again by 2e-16; every other
group regenerated bit for bit. ``ce63b4b`` changed the default
``alpha_channels`` from 0.25 to 0.125 on purpose (issue 32,
``results/penalties/README.md``): every group with channel fits moved (up
to 7% relative for the test statistics); ``inputs`` and both ``rrr`` groups
regenerated bit for bit. ``2d73b1c`` changed the fits on purpose (issue 34:
the ALS line search on the joint stage from its sixth iteration, and the
baseline given the channels as a rank-K update of the channel-free ridge
solution): every group with channel fits moved, with the same ranks and
numbers of channels everywhere (largest difference over the largest value:
1.1e-4 in the selection groups, 6.7e-3 in ``semedo_fixed``, 1.0e-2 in the
trial-null test, whose statistic went from 0.13061 to 0.13023 with the same
p-value); fits that crawled stop sooner (loss histories of 66 entries in
place of 124 in ``selection_trials``, 52 in place of 94 in ``park_fixed``).
``inputs`` and both ``rrr`` groups regenerated bit for bit. ``f9fe0bf``
changed the modulation test on purpose (issue 45: the reduced model regresses
a quadratic, drifting source map and the modulator's piecewise-linear effect
out of the target, and the null permutes only the modulator's part that the
source and the session do not predict): the four ``modulation_*`` groups moved
(other statistics, channel counts and p-values, as the new test answers a
narrower question), and the ``bootstrap_*`` groups gained the energy draws
and ``attrs.metric`` of the asymmetry test (issue 46) with every earlier key
bit for bit. Every other group regenerated bit for bit. Regenerate only
for a deliberate change of results, from a clean checkout of the commit
that makes it, and say so in that commit.

**The values are defined by that commit. Regenerate them only with the
package of that commit imported**; running this script on later code would
overwrite the reference with the values under test. The script refuses to
write unless the imported ``mics`` is a git checkout of ``GOLDEN_COMMIT``
with no changes under ``mics/`` (``--any-commit`` overrides, for
experiments, and never for the files in the repository)::

    git worktree add /tmp/mics-golden f9fe0bf          # the defining commit
    cd /tmp          # not the repository root: ./mics would shadow PYTHONPATH
    PYTHONPATH=/tmp/mics-golden <repo>/.venv/bin/python \
        <repo>/tests/golden/make_golden.py               # writes tests/golden/*.npz

Options: ``--out DIR`` writes elsewhere (e.g. to check that regeneration is
deterministic), ``--compare DIR`` reports, group by group, whether the values
just computed equal those in ``DIR`` bit for bit (or their largest relative
difference), ``--only NAME ...`` limits the groups. The script prints which
``mics`` it imported.

What is frozen (every case uses the public API only, so the same functions
run unchanged on the reorganised package; the test imports them from here):

* selection: ``MICs(random_state=0)`` with its default selection on a small
  ``mics.simulate`` data set, solver "moments" and "data", with trial ids
  (``groups=`` and a labelled ``trial`` coordinate), on Dask arrays, and
  ``fit_sessions``: every ``cv_results_`` array, ``rank_``, ``n_channels_``
  and the fitted attributes;
* ``mics.test_modulation``: the circular null (also stopped early), the trial
  null, in memory and on Dask arrays;
* ``mics.bootstrap_channels``: block and trial resampling, in memory and on
  Dask arrays (intervals and draws);
* ``mics.ReducedRankRegressionCV``: ``cv_results_``, ``rank_``, ``coef_``,
  ``intercept_``... in memory and on Dask arrays;
* fixed-rank fits (rank 2, one channel) on the Semedo et al. 2019 sample and
  on one Park et al. 2024 session (these need the recordings in
  ``../shared/data`` or ``$MICS_DATA_DIR``; without them they are skipped).

Every case runs with BLAS limited to one thread (as the test does), so the
bits do not depend on how many cores the machine has. Dask cases
(``CHUNKED``) are computed on the synchronous scheduler; the script then
recomputes them on ``distributed`` clusters of 1 and 2 worker processes and
reports whether those give the same bits.
"""

from __future__ import annotations

import argparse
import hashlib
import platform
import subprocess
import sys
import time
import warnings
from contextlib import nullcontext
from pathlib import Path

import numpy as np

import mics

GOLDEN_COMMIT = "f9fe0bf"
HERE = Path(__file__).resolve().parent
META = "__generated_by__"  # a key of every file that is not a value

# ----------------------------------------------------------------------------- inputs
# Uneven row blocks (fold boundaries fall inside blocks), as tests/test_chunked.py.
CHUNKS = (130, 71, 200, 199)
SESSION_CUTS = ((0, 180), (180, 420), (420, 600))
SESSION_OFFSETS = ((0.0, 0.0, 0.0), (40.0, -7.0, 3.0), (-15.0, 2.0, -1.0))


def sim_data():
    """600 samples, 12 source, 9 target neurons, 3 modulators, rank 2, one channel."""
    X, Y, Z, _ = mics.simulate(
        n_samples=600,
        n_source=12,
        n_target=9,
        n_modulators=3,
        rank=2,
        n_channels=1,
        random_state=0,
    )
    return X, Y, Z


def trial_data():
    """40 trials x 15 samples, 8 grating directions (xarray.Dataset, ``trial`` coordinate)."""
    data, _ = mics.simulate_trials(
        n_trials=40, n_samples_per_trial=15, n_channels=1, random_state=0
    )
    return data


def trial_arrays():
    data = trial_data()
    return (
        data.X.values,
        data.Y.values,
        data.Z.values,
        data.trial.values,
        data.direction.values,
    )


def lazy(*arrays, chunks=CHUNKS):
    """Plain Dask arrays cut into row blocks ``chunks`` (all columns in one block)."""
    import dask.array as da

    return tuple(da.from_array(a, chunks=(chunks,) + (-1,) * (a.ndim - 1)) for a in arrays)


def sessions(chunked=False):
    """Three sessions of the simulated data with their own offsets."""
    X, Y, Z = sim_data()
    out = []
    for (a, b), (ox, oy, oz) in zip(SESSION_CUTS, SESSION_OFFSETS, strict=True):
        s = (X[a:b] + ox, Y[a:b] + oy, Z[a:b] + oz)
        out.append(lazy(*s, chunks=70) if chunked else s)
    return out


def semedo_arrays():
    """V1 source (X), V2 (Y) and the top 3 principal components of the held-out V1
    neurons (Z, unit variance), as studies/semedo2019_third_population.py builds them."""
    ds = mics.datasets.semedo2019()
    population = ds.population.values
    act = ds.activity.values
    X, Y, held_out = (act[:, population == name] for name in ("V1 source", "V2", "V1 held-out"))
    centred = held_out - held_out.mean(axis=0)
    U = np.linalg.svd(centred, full_matrices=False)[0]
    Z = U[:, :3] * np.sqrt(len(centred))
    return X, Y, Z


PARK_SESSION = "230809_mrcuts28_fov4"


def park_arrays():
    """Condition-mean residuals of one session split into random halves (split seed 0),
    pupil and running speed as modulators (studies/park2024_state_gating.py)."""
    ds = mics.datasets.park2024(PARK_SESSION)
    resid = mics.preprocessing.subtract_condition_means(ds["activity"], "direction")
    activity = np.asarray(resid.values, dtype=float)
    order = np.random.default_rng(0).permutation(activity.shape[1])
    half = activity.shape[1] // 2
    X, Y = activity[:, np.sort(order[:half])], activity[:, np.sort(order[half:])]
    Z = np.column_stack([ds.pupil.values, ds.speed.values])
    return X, Y, Z


# ------------------------------------------------------------------------- flattening
# Documented fitted attributes of MICs (ReducedRankRegressionCV: RRR_FITTED).
FITTED = (
    "rank_",
    "n_channels_",
    "coef_",
    "intercept_",
    "modulator_coef_",
    "source_subspace_",
    "target_subspace_",
    "singular_values_",
    "channel_weights_",
    "source_patterns_",
    "target_patterns_",
    "modulator_patterns_",
    "source_mean_",
    "modulator_mean_",
    "source_covariance_",
    "loss_history_",
    "n_iter_",
    "converged_",
    "solver_",
    "source_scale_",
    "target_scale_",
    "modulator_scale_",
)
RRR_FITTED = (
    "rank_",
    "coef_",
    "intercept_",
    "source_subspace_",
    "target_subspace_",
    "singular_values_",
)


def _attributes(est, names, prefix=""):
    # np.asarray: fits on labelled inputs have DataArray patterns
    return {f"{prefix}{name}": np.asarray(getattr(est, name)) for name in names}


def _cv_results(est, prefix=""):
    return {f"{prefix}cv_results_.{k}": np.asarray(v) for k, v in est.cv_results_.items()}


def mic_fit(est, prefix=""):
    """``cv_results_`` (when the fit selected) and the fitted attributes."""
    out = _cv_results(est, prefix) if hasattr(est, "cv_results_") else {}
    return {**out, **_attributes(est, FITTED, prefix)}


def rrr_fit(est, prefix=""):
    return {**_cv_results(est, prefix), **_attributes(est, RRR_FITTED, prefix)}


def modulation(res, prefix=""):
    """Every field of a ``ModulationTest``."""
    names = (
        "statistic",
        "selected_improvement",
        "null_distribution",
        "p_value",
        "n_channels",
        "shifts",
        "null",
    )
    out = {f"{prefix}{name}": np.asarray(getattr(res, name)) for name in names}
    if res.permutations is not None:
        out[f"{prefix}permutations"] = np.asarray(res.permutations)
    return out


def bootstrap(ds):
    """Every variable (intervals and ``*_draws``) and the attributes of a bootstrap result."""
    out = {f"{name}": np.asarray(ds[name].values) for name in sorted(ds.data_vars)}
    out["bound"] = np.asarray(ds["bound"].values)
    out.update({f"attrs.{k}": np.asarray(v) for k, v in sorted(ds.attrs.items())})
    return out


def digest(**arrays):
    """SHA-256 of each input array's dtype, shape and bytes (inputs are compared bitwise)."""
    out = {}
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
        out[f"sha256.{name}"] = np.asarray(h.hexdigest())
    return out


# ------------------------------------------------------------------------------ cases
def _selection(**params):
    return mics.MICs(random_state=0, verbose=0, **params)


# the modulation test's estimator, and the study's cheap one for the trial null
def _test_estimator():
    return mics.MICs(random_state=0, verbose=0, max_rank=3, max_channels=2)


def _trial_test_estimator():
    return mics.MICs(
        random_state=0,
        verbose=0,
        cv=5,
        max_channels=2,
        n_init=1,
        max_iter=50,
        tol=1e-5,
        channel_search="grid",
    )


TEST_ARGS = dict(n_permutations=5, random_state=4, verbose=0)
BOOT_ARGS = dict(n_boot=4, random_state=2, verbose=0)


def case_inputs():
    X, Y, Z = sim_data()
    Xt, Yt, Zt, trial, direction = trial_arrays()
    return digest(X=X, Y=Y, Z=Z, trials_X=Xt, trials_Y=Yt, trials_Z=Zt, trial=trial,
                  direction=direction)  # fmt: skip


def case_selection_moments():
    return mic_fit(_selection(solver="moments").fit(*sim_data()))


def case_selection_data():
    return mic_fit(_selection(solver="data").fit(*sim_data()))


def case_selection_trials():
    X, Y, Z, trial, _ = trial_arrays()
    return mic_fit(_selection().fit(X, Y, Z, groups=trial))


def case_selection_trials_labelled():
    """The trial ids come from the ``trial`` coordinate; patterns come back labelled."""
    data = trial_data()
    return mic_fit(_selection().fit(data.X, data.Y, data.Z))


def case_sessions():
    return mic_fit(_selection(max_rank=3, max_channels=2).fit_sessions(sessions()))


def case_modulation_circular():
    X, Y, Z = sim_data()
    est = _test_estimator()
    res = mics.test_modulation(est, X, Y, Z, n_jobs=1, **TEST_ARGS)
    stopped = mics.test_modulation(est, X, Y, Z, n_jobs=1, stop_after=1, **TEST_ARGS)
    return {**modulation(res), **modulation(stopped, "stop_after_1.")}


def case_modulation_trial():
    X, Y, Z, trial, direction = trial_arrays()
    res = mics.test_modulation(
        _trial_test_estimator(), X, Y, Z, groups=trial, conditions=direction, null="trial",
        n_jobs=1, **TEST_ARGS,
    )  # fmt: skip
    return modulation(res)


def case_bootstrap_block():
    X, Y, Z = sim_data()
    model = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    return bootstrap(mics.bootstrap_channels(model, X, Y, Z, n_jobs=1, **BOOT_ARGS))


def case_bootstrap_trial():
    X, Y, Z, trial, _ = trial_arrays()
    model = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    return bootstrap(mics.bootstrap_channels(model, X, Y, Z, groups=trial, n_jobs=1, **BOOT_ARGS))


def _rrr_cases(chunked):
    X, Y, _ = sim_data()
    Xt, Yt, _, trial, _ = trial_arrays()
    if chunked:
        X, Y, Xt, Yt = lazy(X, Y, Xt, Yt)
    plain = mics.ReducedRankRegressionCV(ranks=range(6)).fit(X, Y)
    trials = mics.ReducedRankRegressionCV(ranks=range(5), cv=5, alpha=5.0)
    trials.fit(Xt, Yt, groups=trial)
    return {**rrr_fit(plain), **rrr_fit(trials, "trials_alpha.")}


def case_rrr():
    return _rrr_cases(chunked=False)


def case_selection_chunked():
    return mic_fit(_selection().fit(*lazy(*sim_data())))


def case_selection_trials_chunked():
    X, Y, Z, trial, _ = trial_arrays()
    return mic_fit(_selection().fit(*lazy(X, Y, Z), groups=trial))


def case_sessions_chunked():
    return mic_fit(_selection(max_rank=3, max_channels=2).fit_sessions(sessions(chunked=True)))


def case_modulation_circular_chunked():
    res = mics.test_modulation(_test_estimator(), *lazy(*sim_data()), **TEST_ARGS)
    return modulation(res)


def case_modulation_trial_chunked():
    X, Y, Z, trial, direction = trial_arrays()
    res = mics.test_modulation(
        _trial_test_estimator(), *lazy(X, Y, Z), groups=trial, conditions=direction,
        null="trial", **TEST_ARGS,
    )  # fmt: skip
    return modulation(res)


def case_bootstrap_block_chunked():
    X, Y, Z = sim_data()
    model = mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z)
    return bootstrap(mics.bootstrap_channels(model, *lazy(X, Y, Z), **BOOT_ARGS))


def case_rrr_chunked():
    return _rrr_cases(chunked=True)


def _fixed_fit(X, Y, Z):
    return mic_fit(mics.MICs(rank=2, n_channels=1, random_state=0, verbose=0).fit(X, Y, Z))


def case_semedo_fixed():
    X, Y, Z = semedo_arrays()
    return {**digest(X=X, Y=Y, Z=Z), **_fixed_fit(X, Y, Z)}


def case_park_fixed():
    X, Y, Z = park_arrays()
    return {**digest(X=X, Y=Y, Z=Z), **_fixed_fit(X, Y, Z)}


IN_MEMORY = {
    "inputs": case_inputs,
    "selection_moments": case_selection_moments,
    "selection_data": case_selection_data,
    "selection_trials": case_selection_trials,
    "selection_trials_labelled": case_selection_trials_labelled,
    "sessions": case_sessions,
    "modulation_circular": case_modulation_circular,
    "modulation_trial": case_modulation_trial,
    "bootstrap_block": case_bootstrap_block,
    "bootstrap_trial": case_bootstrap_trial,
    "rrr": case_rrr,
}
# Dask inputs: on the synchronous scheduler, and on 1 and 2 distributed workers.
CHUNKED = {
    "selection_chunked": case_selection_chunked,
    "selection_trials_chunked": case_selection_trials_chunked,
    "sessions_chunked": case_sessions_chunked,
    "modulation_circular_chunked": case_modulation_circular_chunked,
    "modulation_trial_chunked": case_modulation_trial_chunked,
    "bootstrap_block_chunked": case_bootstrap_block_chunked,
    "rrr_chunked": case_rrr_chunked,
}
# The Dask groups the test also recomputes on 1 and 2 worker processes (this
# script checks all of CHUNKED there). The selections are left out to keep the
# test cheap: the modulation tests' observed fits run the same selection there.
ON_WORKERS = (
    "sessions_chunked",
    "modulation_circular_chunked",
    "modulation_trial_chunked",
    "bootstrap_block_chunked",
    "rrr_chunked",
)
# Need the recordings (../shared/data or $MICS_DATA_DIR).
SHARED_DATA = {
    "semedo_fixed": case_semedo_fixed,
    "park_fixed": case_park_fixed,
}
CASES = {**IN_MEMORY, **CHUNKED, **SHARED_DATA}


def compute(name, scheduler="synchronous"):
    """The values of one case, BLAS on one thread, warnings silenced.

    Dask cases run on ``scheduler`` (a ``dask.config`` scheduler name); None
    uses the active one, e.g. the ``distributed.Client`` the caller opened.
    With a named scheduler no ``distributed`` client may be active: mics
    sends its batched fits to any default client.
    """
    from threadpoolctl import threadpool_limits

    context = nullcontext()
    if name in CHUNKED and scheduler is not None:
        import dask

        if _active_client() is not None:
            raise RuntimeError(f"a distributed client is active; {name} would run on it")
        context = dask.config.set(scheduler=scheduler)
    with context, threadpool_limits(limits=1, user_api="blas"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings of the small fits
        return CASES[name]()


def _active_client():
    try:
        from distributed import default_client

        return default_client()
    except (ImportError, ValueError):
        return None


def distributed_cluster(n_workers):
    """A ``LocalCluster`` of ``n_workers`` single-threaded worker processes and its client."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    return cluster, Client(cluster)


def worker_mics_files(client):
    """``mics.__file__`` in every worker process (they must import the package under test)."""
    return set(client.run(lambda: __import__("mics").__file__).values())


# --------------------------------------------------------------------------- storage
def load(path):
    """Values of a golden file (without the generator's note)."""
    with np.load(path, allow_pickle=False) as f:
        return {k: f[k] for k in f.files if k != META}


def compare(got, want):
    """``"bitwise"``, or a description of the first difference."""
    if set(got) != set(want):
        return f"keys differ: {sorted(set(got) ^ set(want))}"
    worst = 0.0
    for k in sorted(want):
        a, b = np.asarray(got[k]), np.asarray(want[k])
        if a.dtype != b.dtype or a.shape != b.shape:
            return f"{k}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
        if a.tobytes() == b.tobytes():
            continue
        if b.dtype.kind not in "fc":
            return f"{k}: values differ"
        scale = max(np.abs(b).max(), np.finfo(float).tiny)
        worst = max(worst, float(np.abs(a - b).max() / scale))
    return "bitwise" if worst == 0.0 else f"max |diff| / max |value| = {worst:.3g}"


def _checkout_state():
    """(commit, clean) of the git checkout holding the imported mics, or (None, False)."""
    root = Path(mics.__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "mics"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None, False
    return commit, not dirty


def _note(commit):
    import dask
    import scipy
    import sklearn

    return (
        f"tests/golden/make_golden.py; mics {commit} ({mics.__file__}); "
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"scikit-learn {sklearn.__version__}, dask {dask.__version__}; {platform.machine()}"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="where to write the .npz files")
    parser.add_argument("--compare", type=Path, help="report equality with the files in DIR")
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), help="these groups only")
    parser.add_argument("--no-distributed", action="store_true", help="skip the cluster runs")
    parser.add_argument(
        "--any-commit", action="store_true", help="write even if mics is not GOLDEN_COMMIT"
    )
    args = parser.parse_args(argv)

    commit, clean = _checkout_state()
    print(f"mics imported from {mics.__file__} (commit {commit}, clean={clean})")
    if not (clean and commit and commit.startswith(GOLDEN_COMMIT)) and not args.any_commit:
        sys.exit(
            f"refusing to write: the golden values are defined by a clean checkout of "
            f"{GOLDEN_COMMIT}; put it first on PYTHONPATH (see the docstring)."
        )
    names = args.only or list(CASES)
    have_data = True
    try:
        mics.datasets.fetch("semedo2019/sample_data.mat")
        mics.datasets.fetch(f"park2024/{PARK_SESSION}_grat-000_data.mat")
    except mics.datasets.DatasetNotFoundError as err:
        have_data = False
        print(f"recordings not found, shared-data groups skipped:\n{err}")
    args.out.mkdir(parents=True, exist_ok=True)
    note = np.asarray(_note(commit))
    values = {}
    for name in names:
        if name in SHARED_DATA and not have_data:
            continue
        start = time.perf_counter()
        values[name] = compute(name)
        path = args.out / f"{name}.npz"
        np.savez_compressed(path, **values[name], **{META: note})
        status = ""
        if args.compare is not None:
            other = args.compare / path.name
            status = compare(values[name], load(other)) if other.exists() else "no file"
        elapsed = time.perf_counter() - start
        print(f"{name:30s} {path.stat().st_size:7d} B {elapsed:6.2f} s  {status}")
    chunked = [n for n in values if n in CHUNKED]
    if chunked and not args.no_distributed:
        for n_workers in (1, 2):
            cluster, client = distributed_cluster(n_workers)
            with cluster, client:
                files = worker_mics_files(client)
                print(f"{n_workers} distributed worker(s), mics from {sorted(files)}")
                if files != {mics.__file__}:
                    sys.exit("the workers import another mics than this process")
                for name in chunked:
                    start = time.perf_counter()
                    got = compute(name, scheduler=None)
                    elapsed = time.perf_counter() - start
                    print(f"  {name:28s} {elapsed:6.2f} s  vs synchronous: "
                          f"{compare(got, values[name])}")  # fmt: skip
    total = sum(p.stat().st_size for p in args.out.glob("*.npz"))
    print(f"{len(values)} groups written to {args.out}; all .npz there: {total} bytes")


if __name__ == "__main__":
    main()
