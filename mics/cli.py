"""Command line: ``mics demo`` runs the main job end to end on simulated data."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["main"]


#: Names the demo gives its simulated modulators, so figures show named axes.
DEMO_MODULATORS = ("running speed", "pupil")


def _labelled(X, Y, Z, fs=10.0):
    """The simulated arrays as DataArrays, as a loader from ``mics.io`` returns them."""
    import xarray as xr

    time = {"time": np.arange(X.shape[0]) / fs}

    def neurons(prefix, n):
        return {"neuron": [f"{prefix}{i:02d}" for i in range(n)]}

    return (
        xr.DataArray(X, dims=("time", "neuron"), coords={**time, **neurons("src", X.shape[1])}),
        xr.DataArray(Y, dims=("time", "neuron"), coords={**time, **neurons("tgt", Y.shape[1])}),
        xr.DataArray(
            Z, dims=("time", "modulator"), coords={**time, "modulator": list(DEMO_MODULATORS)}
        ),
    )


def _inference(model, X, Y, Z, args):
    """Modulation test and bootstrap with light settings, so that the demo stays quick."""
    import mics

    light = {"cv": 3, "n_init": 0, "verbose": 0, "random_state": args.seed}
    test = boot = None
    if args.permutations > 0:
        # max_channels=1: the statistic is then the CV gain of one channel over
        # none, half the cost of the default and still calibrated by the same null.
        estimator = mics.MICs(rank=model.rank_, max_channels=1, **light)
        test = mics.test_modulation(
            estimator, X, Y, Z, n_permutations=args.permutations, random_state=args.seed
        )
    if args.boot > 0 and model.n_channels_:
        boot = mics.bootstrap_channels(
            model.set_params(n_init=0), X, Y, Z, n_boot=args.boot, random_state=args.seed
        )
    return test, boot


def _figures(model, Zd, test, boot):
    """Every report figure with what a reader should see in it."""
    from mics import plotting
    from mics.report import ReportFigure

    figs = []
    if getattr(model, "cv_results_", None) is not None:
        figs.append(
            ReportFigure(
                "cv_curves.png",
                "Choosing the baseline rank and the number of channels",
                "Cross-validated performance (1 - NSE, mean +/- SEM over folds) against each "
                "candidate; the star is the simplest candidate above the dotted line one SEM "
                "below the best (the one-SEM rule).",
                plotting.plot_cv_curves(model)[0].figure,
            )
        )
    if test is not None:
        figs.append(
            ReportFigure(
                "null_distribution.png",
                "Is there modulation? Circular-shift test",
                "Grey: the statistic on data whose modulator was shifted in time (no gating, "
                "same autocorrelations). Red: the statistic on the real data. The p-value cannot "
                "go below 1/(permutations + 1).",
                plotting.plot_null_distribution(test).figure,
            )
        )
    if model.n_channels_:
        figs += [
            ReportFigure(
                "channels.png",
                "The channels",
                "Each row is one channel: the source pattern it reads, the target pattern it "
                "drives, and how much each modulator opens (positive) or closes (negative) it.",
                plotting.plot_channels(model),
            ),
            ReportFigure(
                "channel_gain.png",
                "Channel gain against each modulator",
                "How strongly each channel is switched on as one modulator sweeps its observed "
                "range (others at their mean); the slope is the channel's sensitivity.",
                plotting.plot_channel_gain(model, Zd),
            ),
            ReportFigure(
                "geometry.png",
                "Where the channels sit relative to the communication subspace",
                "Share of each channel's source (x) and target (y) pattern inside the baseline "
                "communication subspaces; the quadrant names the kind of modulation.",
                plotting.plot_geometry(model).figure,
            ),
            ReportFigure(
                "decomposition.png",
                "Decomposition into the four kinds of modulation",
                "Fraction of each channel's (and the whole modulation's) energy that reshapes "
                "the baseline subspace, recruits private source or target dimensions, or is new.",
                plotting.plot_decomposition(model).figure,
            ),
        ]
        if boot is not None:
            figs.append(
                ReportFigure(
                    "bootstrap_intervals.png",
                    "How sure is the decomposition? Block bootstrap",
                    "Bars: the fitted fractions; black lines: bootstrap intervals from refits "
                    "on resampled blocks of time.",
                    plotting.plot_bootstrap_intervals(boot, model).figure,
                )
            )
        figs.append(
            ReportFigure(
                "state_communication.png",
                "Communication at low vs high modulator",
                "The effective communication matrix B(z) at the 10th and 90th percentile of "
                "each modulator (one colour scale) and the principal angles between the two "
                "states' source and target subspaces: small angles mean the modulator rescales "
                "the same dimensions, large ones that it changes which dimensions communicate.",
                plotting.plot_state_communication(model, Zd),
            )
        )
    figs.append(
        ReportFigure(
            "loss_history.png",
            "Training loss",
            "Penalised loss after each alternating sweep; it never increases.",
            plotting.plot_loss_history(model).figure,
        )
    )
    return figs


def _demo(args):
    import mics
    from mics.model.summaries import format_decomposition, summarize
    from mics.report import format_p_value
    from mics.simulation.recovery import factor_match_score, relative_tensor_error

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    X, Y, Z, truth = mics.simulate(
        n_samples=args.samples,
        n_source=args.source,
        n_target=args.target,
        n_modulators=2,
        rank=3,
        n_channels=2,
        geometry=["private_source", "reshape"],
        random_state=args.seed,
    )
    Xd, Yd, Zd = _labelled(X, Y, Z)
    lines = [
        "mics demo: simulated source/target/modulator recording",
        f"  samples={X.shape[0]}  source neurons={X.shape[1]}  target neurons={Y.shape[1]}  "
        f"modulators={Z.shape[1]} ({', '.join(DEMO_MODULATORS)})",
        "  truth: baseline rank 3, channels 2 (one private-source, one reshape)",
        "",
    ]
    t0 = time.perf_counter()
    model = mics.MICs(
        rank=None if args.select else 3,
        n_channels=None if args.select else 2,
        cv=5,
        max_rank=6,
        max_channels=3,
        random_state=args.seed,
        verbose=1,
    ).fit(Xd, Yd, Zd)
    elapsed = time.perf_counter() - t0
    lines += [
        f"fit ({'cross-validated selection' if args.select else 'fixed ranks'}) "
        f"in {elapsed:.2f} s",
        f"  baseline rank r = {model.rank_},  channels K = {model.n_channels_}",
        "  channel weights: " + ", ".join(f"{w:.3f}" for w in model.channel_weights_),
        "  true weights:    " + ", ".join(f"{w:.3f}" for w in truth.channel_weights_),
        f"  training 1 - NSE = {model.score(Xd, Yd, Zd):.3f} "
        f"(reduced-rank regression alone: "
        f"{mics.ReducedRankRegression(rank=3).fit(X, Y).score(X, Y):.3f})",
        f"  factor match score vs truth = {factor_match_score(truth, model):.3f}",
        f"  relative tensor error = {relative_tensor_error(truth, model):.3f}",
        "",
    ]
    saved = Path(model.to_netcdf(out / "model.nc")).resolve()
    t0 = time.perf_counter()
    test, boot = _inference(model, X, Y, Z, args)
    files = []
    if test is not None:
        lines += [
            f"modulation test (circular null, {args.permutations} permutations): "
            f"statistic = {test.statistic:.4f}, "
            f"{format_p_value(test.p_value, test.null_distribution.size)}",
            f"  {test.summary()}",
        ]
        files.append(_write_test(out / MODULATION_TEST_CSV, test).name)
    if test is not None or boot is not None:
        lines += [f"  inference in {time.perf_counter() - t0:.2f} s", ""]
    if model.n_channels_:
        dec = model.decompose()
        lines += [format_decomposition(dec), "", summarize(dec, intervals=boot), ""]
    lines.append(f"fitted model saved to {saved} (reopen with mics.load)")
    text = "\n".join(lines)
    print(text)
    index = None
    figs = []
    try:
        import matplotlib

        matplotlib.use("Agg")
        from mics.report import write_report

        figs = _figures(model, Zd, test, boot)
        index = write_report(out, text, figs, title="mics demo report").resolve()
        files = ["summary.txt", *files, *(f.filename for f in figs)]
    except ImportError as err:  # plotting is optional for the summary
        (out / "summary.txt").write_text(text)
        files = ["summary.txt", *files]
        print(f"figures skipped: {err}")
    folder = out.resolve()
    print(f"report folder: {folder}")
    if index is not None:
        print(f"report page:   {index}")
    print(f"model file:    {saved}")
    print(f"  also in the folder: {', '.join(files)}")
    return DemoRun(
        model=model, test=test, folder=folder, index=index, model_file=saved, figures=figs
    )


#: File of the report folder that holds the modulation test's statistics.
MODULATION_TEST_CSV = "modulation_test.csv"


def _write_test(path, test):
    """The observed statistic and every null statistic, at full precision, as CSV."""
    rows = [
        "# circular-shift modulation test: p = (1 + #{null >= observed}) / (1 + permutations)",
        "kind,shift,statistic",
        f"observed,0,{float(test.statistic)!r}",
    ]
    shifts = np.asarray(test.shifts)
    for i, value in enumerate(np.asarray(test.null_distribution, dtype=float)):
        shift = int(shifts[i]) if i < shifts.size else ""
        rows.append(f"null,{shift},{float(value)!r}")
    path.write_text("\n".join(rows) + "\n")
    return path


@dataclass
class DemoRun:
    """What one ``mics demo`` run produced (the paths are absolute).

    ``figures`` holds the report's figures (:class:`mics.report.ReportFigure`,
    still open), empty when matplotlib is missing.
    """

    model: object
    test: object
    folder: Path
    index: Path | None
    model_file: Path
    figures: list = field(default_factory=list)


class _SubcommandParser(argparse.ArgumentParser):
    """A subcommand's parser that rejects unknown flags itself, with its own usage line.

    By default argparse hands a subcommand's unknown arguments back to the top-level
    parser, whose error then shows the top-level usage instead of the subcommand's.
    """

    def parse_known_args(self, args=None, namespace=None):
        namespace, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def _parser():
    """The ``mics`` argument parser, with every option's default in its help."""
    import mics

    formatter = argparse.ArgumentDefaultsHelpFormatter
    parser = argparse.ArgumentParser(
        prog="mics", description=__doc__.replace("``", ""), formatter_class=formatter
    )
    parser.add_argument("--version", action="version", version=f"mics {mics.__version__}")
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_SubcommandParser
    )
    demo = sub.add_parser(
        "demo",
        help="simulate, fit and report (the main job)",
        description="Simulate a source/target/modulator recording with two planted channels, "
        "fit MICs, test the modulation, bootstrap the decomposition and write a report folder.",
        formatter_class=formatter,
    )
    demo.add_argument("--samples", type=int, default=2000, help="time samples to simulate")
    demo.add_argument("--source", type=int, default=60, help="simulated source neurons")
    demo.add_argument("--target", type=int, default=40, help="simulated target neurons")
    demo.add_argument(
        "--seed", type=int, default=0, help="random seed of the simulation, fit and tests"
    )
    demo.add_argument(
        "--select",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="choose rank and channels by cross-validation (--no-select: fix them at the truth)",
    )
    demo.add_argument(
        "--permutations",
        type=int,
        default=19,
        help="circular shifts of the modulation test (0 skips it)",
    )
    demo.add_argument(
        "--boot", type=int, default=10, help="bootstrap resamples of the decomposition (0 skips)"
    )
    demo.add_argument(
        "--output",
        default="mics_report",
        help="report folder (summary, figures, index.html, model.nc); created if missing",
    )
    return parser


def main(argv=None):
    """Entry point of the ``mics`` command."""
    args = _parser().parse_args(argv)
    np.set_printoptions(precision=3, suppress=True)
    _demo(args)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
