"""The data-quality checks every fit and test runs first (issue 50).

``mics.preprocessing.find_artifacts`` runs the detectors that
``mics.data.make_problem`` runs before every fit, at both sizes: beside
``fit.DefaultSelection`` it says what share of a default fit the check
takes. The suite skips commits from before the checks.
"""

from __future__ import annotations

from benchmarks import SIZES, data, warm_up


class FindArtifacts:
    """``find_artifacts(X, Y, Z)``: artifact frames, extreme samples and glitches."""

    params = list(SIZES)
    param_names = ["size"]
    timeout = 120

    def setup(self, size):
        try:
            from mics.preprocessing import find_artifacts
        except ImportError:  # before the checks
            raise NotImplementedError("no data-quality checks at this commit") from None
        warm_up()
        self.find = find_artifacts
        s = SIZES[size]
        self.X, self.Y, self.Z = data(s["T"], s["p"], s["q"], s["m"])
        self.find(self.X, self.Y, self.Z)  # the numba kernel compiled

    def time_find_artifacts(self, size):
        self.find(self.X, self.Y, self.Z)
