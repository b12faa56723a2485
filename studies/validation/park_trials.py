"""A Park et al. 2024 session through the trial-aware pipeline, with a lag scan.

Session ``230809_mrcuts28_fov4`` (56 V1 neurons, 128 trials x 49 samples at
16 Hz, 8 directions), the tutorial's demonstration split (even / odd neuron
positions as "source" / "target"; one population, so this demonstrates the
workflow, it is not a finding about two areas), pupil and running speed as
the modulator.

1. ``subtract_condition_means(ds, "direction")`` (activity, pupil, speed);
   every column z-scored.
2. ``MICs(random_state=0).fit`` with trial-blocked 10-fold selection (the
   ``trial`` coordinate supplies the groups), on raw and on subtracted data.
3. ``test_modulation`` on the subtracted data with the trial-level null
   (trials permuted within direction), ``--n-perm`` permutations, estimator
   ``MICs(rank=<selected>, cv=5, max_channels=2, n_init=1)``.
4. ``lag_scan`` (lags -8..8 samples = -0.5..0.5 s, 5 trial folds) on raw and
   subtracted data.

Writes ``park_cv.png``, ``park_null.png``, ``park_lag_scan.png``,
``park_summary.txt`` (what it printed), ``run.json`` and ``README.md`` into
``--out`` (default ``results/park_trials/``). Needs the shared recordings
(``$MICS_DATA_DIR`` or ``../shared/data``).

Usage::

    python studies/validation/park_trials.py --n-perm 19   # the committed run, 10 s
    python studies/validation/park_trials.py --report-only # README from park_summary.txt
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import mics  # noqa: E402
from mics import plotting  # noqa: E402
from mics.preprocessing import subtract_condition_means, zscore  # noqa: E402
from mics.workflows import lag_scan  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "studies"))
import study_tools as tools  # noqa: E402

OUT = ROOT / "results" / "park_trials"
SESSION = "230809_mrcuts28_fov4_grat-000_data.mat"


def _data_dir():
    env = os.environ.get("MICS_DATA_DIR")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def _inputs(ds):
    group = np.where(np.arange(ds.sizes["neuron"]) % 2 == 0, "A", "B")
    ds = ds.assign_coords(group=("neuron", group))
    X, Y, Z = mics.io.build_inputs(
        ds, source={"group": "A"}, target={"group": "B"}, modulators=["pupil", "speed"]
    )
    return tuple(zscore(a) for a in (X, Y, Z))


def _test(X, Y, Z, rank, args, out, say):
    """Step 3: the trial-null test and its figure."""
    est = mics.MICs(rank=rank, cv=5, max_channels=2, n_init=1, verbose=0)
    test = mics.test_modulation(
        est,
        X,
        Y,
        Z,
        conditions="direction",
        n_permutations=args.n_perm,
        n_jobs=args.n_jobs,
        verbose=0,
        random_state=0,
    )
    null = test.null_distribution
    say(
        f"test_modulation (subtracted, null={test.null!r}, within direction, "
        f"{args.n_perm} permutations): statistic {test.statistic:.5f}, p = {test.p_value:.3f}, "
        f"null mean {null.mean():.5f} sd {null.std(ddof=1):.5f}"
    )
    fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
    ax.hist(null, bins=20, color="0.6", label=f"trial null ({null.size})")
    ax.axvline(test.statistic, color="C3", label=f"observed, p = {test.p_value:.2f}")
    ax.set_xlabel("best CV NSE improvement of a channel model over K = 0")
    ax.set_ylabel("count")
    ax.legend(fontsize="small")
    fig.savefig(out / "park_null.png", dpi=120)
    plt.close(fig)


def readme(out):
    """``README.md`` from ``park_summary.txt`` and the run record."""
    summary = (out / "park_summary.txt").read_text().rstrip()
    about = (
        f"Session `{SESSION.split('_grat')[0]}` of Park et al. 2024 through the trial-aware "
        "pipeline, as the tutorial does it: the neurons at even and odd positions as 'source' "
        "and 'target' (one population: this demonstrates the workflow, it is not a finding "
        "about two areas), pupil and running speed as the modulator. Selection with "
        "trial-blocked folds on the raw data and with the grating-direction means "
        "subtracted; the modulation test with the trial null (trials permuted within "
        "direction); a lag scan of -0.5 to 0.5 s."
    )
    lines = tools.readme_head(
        "A Park et al. 2024 session through the trial-aware pipeline",
        "studies/validation/park_trials.py",
        out,
        about=about,
    )
    lines += [
        "## What it printed (`park_summary.txt`)",
        "",
        "```text",
        summary,
        "```",
        "",
        "Subtracting the condition means removes what the stimulus drives in common: the "
        "selected rank and its held-out score show how much of the raw communication that was.",
        "",
        "![selection](park_cv.png)",
        "",
        "![null](park_null.png)",
        "",
        "![lag scan](park_lag_scan.png)",
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-perm", type=int, default=99)
    parser.add_argument("--n-jobs", type=int, default=2)
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument(
        "--report-only", action="store_true", help="rebuild README.md from park_summary.txt"
    )
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.report_only:
        readme(out)
        return
    out.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")  # capped CV fits warn about convergence
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    run = tools.RunRecord(__file__, argv, seeds="0 (selection, permutations, lag scan folds)")
    ds = mics.io.load_park2024(_data_dir() / "park2024" / SESSION)
    sub = subtract_condition_means(ds, "direction")
    data = {"raw": _inputs(ds), "subtracted": _inputs(sub)}
    X, Y, Z = data["subtracted"]
    assert "trial" in X.coords  # groups come from here
    say(f"{SESSION}: source {X.shape}, target {Y.shape}, modulator {list(Z.modulator.values)}")

    models = {}
    for name, (Xd, Yd, Zd) in data.items():
        models[name] = mics.MICs(random_state=0, verbose=0).fit(Xd, Yd, Zd)
        m = models[name]
        res = m.cv_results_
        say(
            f"{name:<11} trial-blocked 10-fold selection: rank {m.rank_} "
            f"(CV 1-NSE {res['rank_mean_score'][res['rank_best_index']]:.4f}), "
            f"channels {m.n_channels_} "
            f"(mean NSE for K = {res['n_channels'].tolist()}: "
            f"{np.round(res['n_channels_mean_loss'], 4).tolist()})"
        )
    fig, axes = plt.subplots(2, 2, figsize=(9, 7), layout="constrained")
    for row, name in zip(axes, ("raw", "subtracted"), strict=True):
        plotting.plot_cv_curves(models[name], axes=row)
        row[0].set_title(f"{name}: baseline rank")
        row[1].set_title(f"{name}: channels")
    fig.savefig(out / "park_cv.png", dpi=120)
    plt.close(fig)

    _test(X, Y, Z, models["subtracted"].rank_, args, out, say)

    scans = {}
    for name, (Xd, Yd, Zd) in data.items():
        scans[name] = lag_scan(Xd, Yd, Zd, lags=range(-8, 9), cv=5, verbose=0)
        s = scans[name]
        peak = int(s.lag[np.argmax(s["communication"].values)])
        say(
            f"lag scan {name:<11}: communication peak at lag {peak} "
            f"({peak / ds.attrs['fs']:+.3f} s), 1-NSE at lags -8,-4,0,4,8: "
            f"{np.round(s['communication'].sel(lag=[-8, -4, 0, 4, 8]).values, 4).tolist()}; "
            f"modulation gain range {s['modulation'].min().item():+.4f}.."
            f"{s['modulation'].max().item():+.4f}; {s.attrs['n_samples']} samples"
        )
    fig, axes = plt.subplots(2, 2, figsize=(9, 7), layout="constrained")
    for row, name in zip(axes, ("raw", "subtracted"), strict=True):
        plotting.plot_lag_scan(scans[name], axes=row)
        row[0].set_title(f"{name}: communication")
        row[1].set_title(f"{name}: modulation")
    fig.savefig(out / "park_lag_scan.png", dpi=120)
    plt.close(fig)
    (out / "park_summary.txt").write_text("\n".join(lines) + "\n")
    run.finish(out)
    readme(out)
    print(f"run time {run.seconds:.0f} s; wrote {out}")


if __name__ == "__main__":
    main()
