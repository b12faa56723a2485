"""Every figure of ``mics.plotting`` stays readable: no text runs into other text.

Each public plotting function draws on small fitted data with labelled
neurons (named ticks), three named modulators with units and two channels;
the test fails where two drawn texts (titles, axis and tick labels,
annotations, legends) overlap (``tests/_layout.py``). The report figures of
``mics demo`` are checked the same way in ``tests/test_cli.py``.
"""

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

import mics  # noqa: E402
from mics import plotting  # noqa: E402
from tests._layout import overlapping_texts  # noqa: E402

MODULATORS = ["running speed", "pupil diameter", "whisking"]
UNITS = ["cm/s", "mm", "a.u."]
P, Q = 24, 18
LIGHT = {"cv": 3, "verbose": 0, "random_state": 0}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def data():
    """Labelled source, target and modulator with neuron positions, members planted."""
    X, Y, Z, _ = mics.simulate(
        n_samples=900, n_source=P, n_target=Q, n_modulators=3, rank=2, n_channels=2,
        geometry="random", modulation_snr=1.0, source_members=0.3, target_members=0.3,
        random_state=3,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    t = np.arange(len(X)) / 10.0

    def neurons(values, prefix):
        xy = rng.uniform(0, 512, (values.shape[1], 2))
        coords = {
            "time": t,
            "neuron": [f"{prefix}{i:02d}" for i in range(values.shape[1])],
            "x": ("neuron", xy[:, 0]),
            "y": ("neuron", xy[:, 1]),
        }
        attrs = {"source": "session.nwb"}
        return xr.DataArray(values, dims=("time", "neuron"), coords=coords, attrs=attrs)

    Zd = xr.DataArray(
        Z,
        dims=("time", "modulator"),
        coords={"time": t, "modulator": MODULATORS, "units": ("modulator", UNITS)},
    )
    return neurons(X, "src"), neurons(Y, "tgt"), Zd


@pytest.fixture(scope="module")
def selected(data):
    """Rank and channels chosen by CV: every dense figure."""
    model = mics.MICs(max_rank=3, max_channels=2, **LIGHT).fit(*data)
    assert model.n_channels_ == 2  # the figures below need channels to draw
    return model


@pytest.fixture(scope="module")
def sparse(data):
    """Sparsity chosen on a small grid: the member and sparsity-path figures."""
    model = mics.MICs(rank=2, n_channels=2, sparsity=(0.0, 2.0, 8.0), **LIGHT).fit(*data)
    assert model.sparsity_ > 0
    return model


@pytest.fixture(scope="module")
def population():
    """A 40-neuron modulator population: its patterns are drawn sorted, the largest named."""
    X, Y, Z, _ = mics.simulate(
        n_samples=800, n_source=6, n_target=5, n_modulators=40, rank=1, n_channels=1,
        modulator_kind="population", modulation_snr=2.0, random_state=9,
    )  # fmt: skip
    ids = [f"m{j:02d}" for j in range(40)]
    Zd = xr.DataArray(Z, dims=("time", "neuron"), coords={"neuron": ids})
    return mics.MICs(rank=1, n_channels=1, solver="data", **LIGHT).fit(X, Y, Zd)


@pytest.fixture(scope="module")
def results(data, selected, sparse):
    """The inference results, at the lightest settings that produce them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        test = mics.test_modulation(
            mics.MICs(rank=selected.rank_, max_channels=1, n_init=0, **LIGHT),
            *data, n_permutations=9, n_boot=0, random_state=0, verbose=0,
        )  # fmt: skip
        # 10 draws: the fewest the asymmetry test takes for its standard error
        boot = mics.bootstrap_channels(selected, *data, n_boot=10, random_state=0, verbose=0)
        stability = mics.stability_selection(sparse, *data, n_boot=4, random_state=0, verbose=0)
        power = mics.power_analysis(
            mics.MICs(rank=selected.rank_, n_channels=1, n_init=0, **LIGHT),
            *data, strengths=(0.0, 0.3), n_sims=2, n_permutations=4, random_state=0, verbose=0,
        )  # fmt: skip
    X, Y, Z = data
    # one artifact frame in both populations, one modulator glitch
    Xa, Ya, Za = (np.array(a.values) for a in data)
    Xa[300] += 40 * Xa.std(axis=0)
    Ya[300] += 40 * Ya.std(axis=0)
    Za[600, 0] += 50 * Za[:, 0].std()
    artifacts = mics.preprocessing.find_artifacts(Xa, Ya, Za)
    assert artifacts.frames["X"] is not None and 300 in np.asarray(artifacts.frames["X"])
    scan = mics.lag_scan(X, Y, Z, lags=range(-2, 3), ranks=range(4), cv=3, fs=10.0, verbose=0)
    return {
        "test": test,
        "boot": boot,
        "asymmetry": mics.asymmetry(selected, bootstrap=boot),
        "stability": stability,
        "power": power,
        "scan": scan,
        "artifacts": artifacts,
    }


def _figure(drawn):
    """The figure of whatever a plotting function returned."""
    first = drawn[0] if isinstance(drawn, (tuple, list, np.ndarray)) else drawn
    first = first[0] if isinstance(first, (tuple, list, np.ndarray)) else first
    return first if isinstance(first, matplotlib.figure.Figure) else first.figure


#: Every plotting function of ``mics.plotting`` with the call that draws it
#: (an id "function: case" when one function is drawn more than one way).
DRAWINGS = {
    "plot_channels: population modulator": lambda f: plotting.plot_channels(f["population"]),
    "plot_channels": lambda f: plotting.plot_channels(f["selected"]),
    "plot_cv_curves": lambda f: plotting.plot_cv_curves(f["selected"]),
    "plot_decomposition": lambda f: plotting.plot_decomposition(f["selected"]),
    "plot_geometry": lambda f: plotting.plot_geometry(f["selected"]),
    "plot_loss_history": lambda f: plotting.plot_loss_history(f["selected"]),
    "plot_modulator_patterns": lambda f: plotting.plot_modulator_patterns(f["population"]),
    "plot_state_communication": lambda f: plotting.plot_state_communication(
        f["selected"], f["data"][2]
    ),
    "plot_channel_gain": lambda f: plotting.plot_channel_gain(f["selected"], f["data"][2]),
    "plot_null_distribution": lambda f: plotting.plot_null_distribution(f["test"]),
    "plot_bootstrap_intervals": lambda f: plotting.plot_bootstrap_intervals(
        f["boot"], f["selected"]
    ),
    "plot_asymmetry": lambda f: plotting.plot_asymmetry(f["asymmetry"]),
    "plot_lag_scan": lambda f: plotting.plot_lag_scan(f["scan"]),
    "plot_power": lambda f: plotting.plot_power(f["power"]),
    "plot_members": lambda f: plotting.plot_members(f["sparse"], f["stability"]),
    "plot_members_fov": lambda f: plotting.plot_members_fov(f["sparse"]),
    "plot_member_biplot": lambda f: plotting.plot_member_biplot(f["sparse"]),
    "plot_sparsity_path": lambda f: plotting.plot_sparsity_path(f["sparse"]),
    "plot_artifacts": lambda f: plotting.plot_artifacts(f["artifacts"]),
}


def test_every_plotting_function_is_checked():
    public = {name for name in plotting.__all__ if name.startswith("plot_")}
    assert public == {case.split(":")[0] for case in DRAWINGS}


@pytest.mark.parametrize("name", sorted(DRAWINGS))
def test_no_text_runs_into_other_text(name, data, selected, sparse, population, results):
    fitted = {"data": data, "selected": selected, "sparse": sparse, "population": population}
    fitted.update(results)
    fig = _figure(DRAWINGS[name](fitted))
    assert overlapping_texts(fig) == []
