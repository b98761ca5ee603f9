"""numpy functions flowjit writes with the ones it traces (frontend/numpy_more.py): numpy's
results, dtypes and shapes on every path, for floats with NaN and infinities, integers and
booleans; the arguments that decide shapes must be known while tracing."""

import numpy as np
import pytest

import flowjit
from flowjit.errors import ShapeError, TracerConversionError, UnsupportedFunctionError
from helpers import assert_same_result

RNG = np.random.default_rng(4)
BASE = RNG.standard_normal((4, 6))
BASE[1, 2], BASE[2, 3], BASE[3, 0] = np.nan, np.inf, -np.inf
BASE[0, :] = np.nan                       # an all-NaN row: nanmax, nanmean give NaN there

CASES = {
    "flip": lambda x, y: (np.flip(x), np.flip(x, 0), np.flip(x, (0, 1)), np.flip(x, -1) * 2, np.fliplr(x), np.flipud(x)),
    "moveaxis": lambda x, y: (np.moveaxis(x.reshape(2, 2, 6), 0, -1), np.moveaxis(x.reshape(2, 2, 6), [0, 1], [-1, 0])),
    "stacks": lambda x, y: (np.vstack([x, y, x[0]]), np.hstack([x, y]), np.hstack([x[0], y[1]]),
                            np.column_stack([x[0], y[0]]), np.column_stack([x, y[:, :2]])),
    "splits": lambda x, y: tuple(np.split(x, 2)) + tuple(np.split(x, [1, 4], axis=1)) + tuple(np.array_split(x, 4, axis=1)),
    "tile": lambda x, y: (np.tile(x, 2), np.tile(x, (2, 1)), np.tile(x[0], (3, 1, 2)), np.tile(x, (1, 1, 2))),
    "repeat": lambda x, y: (np.repeat(x, 2), np.repeat(x, 3, axis=1), np.repeat(x, [1, 0, 2, 1], axis=0),
                            x.repeat(2, axis=0)),
    "meshgrid": lambda x, y: (np.meshgrid(x[0], y[1, :3]) + np.meshgrid(x[0, :2], y[0, :3], x[1, :4], indexing="ij")
                              + np.meshgrid(x[0], y[0], sparse=True)),
    "atleast": lambda x, y: (np.atleast_1d(x[0, 0]), np.atleast_2d(x[0]), np.atleast_3d(x[0]), np.atleast_3d(x))
                            + np.atleast_2d(x[0], y),
    "ptp": lambda x, y: (np.ptp(x), np.ptp(x, axis=0), np.ptp(y, axis=1, keepdims=True)),
    "count_nonzero": lambda x, y: (np.count_nonzero(x), np.count_nonzero(x, axis=1),
                                   np.count_nonzero(x > 0, axis=0, keepdims=True)),
    "nan_to_num": lambda x, y: (np.nan_to_num(x), np.nan_to_num(x, nan=-1.0, posinf=9.0), np.nan_to_num(y)),
    "isclose": lambda x, y: (np.isclose(x, y), np.isclose(x, x, equal_nan=True), np.isclose(x, 0.1, atol=0.5),
                             np.isclose(1, y), np.allclose(x, x), np.allclose(y, y + 1e-9)),
    "nans": lambda x, y: (np.nansum(x), np.nansum(x, axis=1), np.nanmean(x), np.nanmean(x, axis=0), np.nanmax(x, axis=1),
                          np.nanmin(x, axis=0, keepdims=True), np.nanmax(y), np.nanprod(x, axis=0), np.nanvar(x),
                          np.nanvar(x, axis=1, ddof=1), np.nanstd(x, axis=0, keepdims=True), np.nanstd(y, ddof=5)),
    "trace": lambda x, y: (np.trace(x), np.trace(x, 1), np.trace(y, -2), x.trace()),
    "inner": lambda x, y: (np.inner(x, y), np.inner(x[0], y[1]), np.inner(x, y[0]), np.inner(x.reshape(2, 2, 6), y),
                           np.inner(x, 2)),
}
# Sums and products in another order than numpy's: equal within rounding.
ROUNDED = {"nans", "inner"}
# Unfused, each of the cases' ops is a kernel of its own (most of this file's minute of a cold
# run); they are numpy functions written with ops every unfused table already compiles.
PATHS = {"fused": {}, "interpreter": {"backend": "interpreter"}}


def _arguments(dtype):
    with np.errstate(all="ignore"):
        if dtype == np.bool_:
            return BASE > 0, BASE[::-1] < 0
        return BASE.astype(dtype), np.nan_to_num(BASE[::-1]).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int32, np.bool_], ids=lambda d: np.dtype(d).name)
def test_functions_match_numpy(dtype):
    """Every case of one dtype in one program (each case numpy raises for, such as np.ptp of
    booleans, must raise too); fused for every dtype, and interpreted in float64."""
    x, y = _arguments(dtype)
    cases, refused = {}, []
    for name, case in CASES.items():
        try:
            with np.errstate(all="ignore"):
                cases[name] = case(x, y)
        except (TypeError, ValueError):
            refused.append(name)
    names = list(cases)

    def program(x, y):
        return tuple(CASES[name](x, y) for name in names)
    for path, options in PATHS.items() if dtype == np.float64 else [("fused", {})]:
        got = flowjit.jit(program, **options)(x, y)
        for name, value in zip(names, got):
            try:
                assert_same_result(tuple(value), tuple(cases[name]), exact=name not in ROUNDED, rtol=1e-6)
            except AssertionError as error:
                raise AssertionError(f"{path}, {name}: {error}") from None
    for name in refused:
        with pytest.raises((TypeError, ValueError)):
            flowjit.jit(CASES[name])(x, y)


def test_shape_arguments_must_be_known_and_numpy_errors_are_kept():
    x = BASE.copy()
    with pytest.raises(TracerConversionError, match=r"np\.repeat: repeats must be known while tracing"):
        flowjit.jit(lambda x, n: np.repeat(x, n))(x, np.array(2))
    with pytest.raises(ShapeError, match=r"np\.split: array split does not result in an equal division"):
        flowjit.jit(lambda x: np.split(x, 4, axis=1))(x)
    with pytest.raises(ShapeError, match=r"np\.moveaxis: .*out of bounds"):
        flowjit.jit(lambda x: np.moveaxis(x, 2, 0))(x)
    with pytest.raises(ShapeError, match=r"np\.fliplr: Input must be >= 2-d"):
        flowjit.jit(lambda x: np.fliplr(x[0]))(x)
    with pytest.raises(ShapeError, match=r"np\.inner: shapes \(4, 6\) and \(6, 4\) not aligned"):
        flowjit.jit(lambda x: np.inner(x, x.T))(x)
    with pytest.raises(UnsupportedFunctionError, match=r"np\.trace of f64\[2,2,6\]"):
        flowjit.jit(lambda x: np.trace(x.reshape(2, 2, 6)))(x)
