"""np.histogram with equal bins over a range known while tracing, as numpy computes it.

numpy's uniform-bin path (``numpy/lib/_histograms_impl.py``): the edges are
``np.linspace(first, last, bins + 1)`` in the result type of the range and the data; a value
in [first, last] goes to ``trunc((x - first) / (last - first) * bins)`` (the last edge into
the last bin), corrected by one either way against the edges themselves, so that each bin is
exactly [edge_i, edge_i+1); values outside the range, and NaN, are dropped; the counts are a
``bincount`` (here a ``scatter_add`` of ones, or of the weights, into one extra bin that
collects the dropped values and is cut off).  The index computation fuses into one loop
kernel; the edges are a constant, numpy's own values.

Not supported: bins given as edges or as a rule name (``"auto"``), and a range taken from
the data (``range=None``: numpy reads the data's min and max first, and raises on NaN).
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.errors import ShapeError, UnsupportedFunctionError, user_location
from flowjit.frontend import numpy_api
from flowjit.frontend.tracer import Tracer


def histogram(a, bins=10, range=None, density=None, weights=None):
    what = "np.histogram"
    trace = numpy_api._trace_of(a, weights)
    x = numpy_api.ravel(numpy_api._as_tracer(trace, a))
    if not isinstance(bins, (int, np.integer)) or isinstance(bins, (bool, np.bool_)):
        raise UnsupportedFunctionError(f"{what} with bins={bins!r}: only a number of equal bins is supported "
                                       f"(bin edges and rule names are not)", user_location())
    if bins < 1:
        raise ShapeError(f"{what}: `bins` must be positive, when an integer", user_location())
    if range is None or any(isinstance(edge, Tracer) for edge in range):
        raise UnsupportedFunctionError(
            f"{what} without a range known while tracing: numpy takes it from the data's min and max (and "
            f"raises on NaN); pass range=(low, high)", user_location())
    low, high = range                       # (numpy scalars keep their strength in the edges' dtype)
    first, last = float(low), float(high)
    if first > last:
        raise ShapeError(f"{what}: max must be larger than min in range parameter.", user_location())
    if not (np.isfinite(first) and np.isfinite(last)):
        raise ShapeError(f"{what}: supplied range of [{first}, {last}] is not finite", user_location())
    edge_type = np.result_type(low, high, np.empty(0, x.dtype))
    if first == last:
        first, last = first - 0.5, last + 0.5
    if np.issubdtype(edge_type, np.integer) or edge_type == np.bool_:
        edge_type = np.result_type(edge_type, float)
    edges = np.linspace(first, last, bins + 1, endpoint=True, dtype=edge_type)
    if np.any(edges[:-1] >= edges[1:]):
        raise ShapeError(f"{what}: Too many bins for data range. Cannot create {bins} finite-sized bins.",
                         user_location())

    values = x.astype(edge_type)
    keep = (values >= first) & (values <= last)
    # numpy's (x - first) / (last - first) * bins: the difference in x's dtype, then float64 (the
    # denominator is a float64 scalar); kept values give [0, bins]
    scaled = (values - first) / np.float64(last - first) * bins
    index = np.where(keep, scaled, 0).astype(np.int64)      # (NaN and values out of range: bin 0 for now)
    index = np.where(index == bins, bins - 1, index)
    table = numpy_api._as_tracer(trace, edges)
    index = index - (values < table[index])
    index = index + ((values >= table[index + 1]) & (index != bins - 1))
    index = np.where(keep, index, bins)                       # the dropped values' bin, cut off below
    if weights is None:
        updates = np.ones_like(index)
    else:
        if np.shape(weights) != np.shape(a):
            raise ShapeError(f"{what}: weights should have the same shape as a.", user_location())
        weights = numpy_api._as_tracer(trace, weights)
        # numpy's bincount adds the weights in float64, then casts to their dtype
        updates = numpy_api.ravel(weights).astype(np.float64)
    counts = trace.emit1(ops.scatter_add, [updates, index], {"shape": [bins + 1]}, what=what)[:bins]
    if weights is not None and counts.dtype != weights.dtype:
        counts = counts.astype(weights.dtype)
    if density:
        widths = np.diff(edges).astype(float)
        counts = counts / widths / counts.sum()
    return counts, edges


FUNCTIONS = {np.histogram: histogram}
METHODS = {}
