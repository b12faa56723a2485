"""``ds.mics``: the readable view of the Datasets that ``mics`` returns.

Importing :mod:`mics` registers it (through :mod:`mics.model`), so a saved
decomposition opened with xarray alone still has ``.mics`` once ``mics`` is
imported.
"""

from __future__ import annotations

import html

import xarray as xr

from mics.model.summaries import (
    format_asymmetry,
    format_bootstrap,
    format_decomposition,
    result_kind,
    summarize,
    summarize_asymmetry,
)

__all__ = ["ResultAccessor"]


@xr.register_dataset_accessor("mics")
class ResultAccessor:
    """Readable views of the Datasets that ``mics`` returns, as ``ds.mics``.

    :meth:`mics.MICs.decompose` and :func:`mics.bootstrap_channels` return
    plain ``xarray.Dataset`` objects, so everything that works on a Dataset
    keeps working (``dec["reshape"].values``, ``boot.quantile``,
    ``xr.merge``, netCDF). ``ds.mics`` adds what a reader wants first: a
    short table. In a notebook it displays as that table; ``print(ds.mics)``
    prints it; :meth:`summary` adds the reading in words.
    """

    def __init__(self, ds):
        self._ds = ds

    @property
    def kind(self):
        """``"decomposition"``, ``"bootstrap"`` or None (another Dataset)."""
        return result_kind(self._ds)

    def table(self):
        """The table: :func:`format_decomposition`, :func:`format_bootstrap` or
        :func:`format_asymmetry`."""
        kind = self._checked_kind()
        if kind == "bootstrap":
            return format_bootstrap(self._ds)
        if kind == "asymmetry":
            return format_asymmetry(self._ds)
        return format_decomposition(self._ds)

    def summary(self, intervals=None, asymmetry=None):
        """The table and, for a decomposition, :func:`summarize`'s paragraph.

        Parameters
        ----------
        intervals : xarray.Dataset, optional
            For a decomposition, the bootstrap of the same model
            (:func:`mics.bootstrap_channels`): its table follows the
            decomposition's and its intervals are quoted in the paragraph.
        asymmetry : xarray.Dataset, optional
            For a decomposition, :func:`mics.asymmetry` of the same model:
            its table and sentence (interval and p of the source - target
            difference) follow.

        Returns
        -------
        text : str
        """
        table = self.table()
        if self.kind == "bootstrap":
            return table
        if self.kind == "asymmetry":
            return f"{table}\n\n{summarize_asymmetry(self._ds)}"
        if intervals is not None:
            table += "\n\n" + format_bootstrap(intervals)
        text = f"{table}\n\n{summarize(self._ds, intervals)}"
        if asymmetry is not None:
            text += f"\n\n{format_asymmetry(asymmetry)}\n{summarize_asymmetry(asymmetry)}"
        return text

    def _checked_kind(self):
        kind = self.kind
        if kind is None:
            raise TypeError(
                "ds.mics reads the Datasets of MICs.decompose() and mics.bootstrap_channels(); "
                "this Dataset has no total_reshape variable."
            )
        return kind

    def __repr__(self):
        if self.kind is None:
            return f"<mics accessor of a Dataset that is not a mics result ({self._ds.sizes})>"
        return self.table()

    def _repr_html_(self):
        if self.kind is None:
            return None
        return f"<pre>{html.escape(self.table())}</pre>"
