"""Comparison helpers shared by the tests."""

from __future__ import annotations

import numpy as np

from flowjit.frontend import pytree


def assert_same_result(actual, expected, *, exact: bool = True, rtol: float | None = None):
    """Same structure, and leaf by leaf the same type, dtype, shape and values (NaN equal NaN)."""
    actual_leaves, paths, actual_tree = pytree.flatten(actual)
    expected_leaves, _, expected_tree = pytree.flatten(expected)
    assert actual_tree == expected_tree, f"structure differs: {actual_tree} vs {expected_tree}"
    for path, got, want in zip(paths, actual_leaves, expected_leaves):
        if not isinstance(want, (np.ndarray, np.generic)):
            assert got == want, f"{path}: {got!r} != {want!r}"
            continue
        got_array, want_array = np.asarray(got), np.asarray(want)
        assert got_array.dtype == want_array.dtype, f"{path}: dtype {got_array.dtype} != {want_array.dtype}"
        assert got_array.shape == want_array.shape, f"{path}: shape {got_array.shape} != {want_array.shape}"
        if exact:
            np.testing.assert_array_equal(got_array, want_array, err_msg=path, strict=True)
        else:
            # Relative to each element, and to the result's scale (sums and differences cancel).
            finite = want_array[np.isfinite(want_array)] if want_array.dtype.kind == "f" else want_array
            scale = float(np.max(np.abs(finite), initial=1.0)) if finite.size else 1.0
            np.testing.assert_allclose(got_array, want_array, rtol=rtol, atol=rtol * scale, equal_nan=True,
                                       err_msg=path)
