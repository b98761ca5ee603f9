"""A row reduction's lanes take the whole row: its last ``ninner % 64`` elements are one more
block of lanes over the row's last 64, not a scalar loop; and a compiled program, whose kernels
are written for the traced shapes, refuses arrays of others."""

import numpy as np
import pytest

import flowjit


def _row_programs(x):
    shifted = x - x.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return (e / e.sum(axis=1, keepdims=True), shifted - np.log(e.sum(axis=1, keepdims=True)),
            np.argmax(x, axis=1), x.mean(axis=1), x.var(axis=1))


def test_a_rows_last_elements_go_through_the_lanes_and_rows_of_any_length_match_numpy():
    """The ``ninner % 64`` elements after the last whole block are one more block of lanes over
    the row's last 64 (those counted already take the start value), not a scalar loop, which
    cost a softmax over 1000 classes a third of its time; so are short rows' in 16 or 8 lanes,
    and rows shorter than that are one scalar loop (a session compiles each fed size)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 1000)).astype(np.float32)
    jitted = flowjit.jit(_row_programs)
    source = "".join(jitted.lower(x).kernel_sources().values())
    assert "last = max(ninner - 64, 0)" in source and "range(tail" not in source, source
    for length in (129, 1000, 1024):
        x = rng.standard_normal((3, length)).astype(np.float32)
        x[1, length - 1] = 40.0                                    # the largest in the last block
        for got, want in zip(jitted(x), _row_programs(x)):
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=f"length {length}")
    for length in (130, 1000):                 # NaN, then the largest, among the last block's counted lanes
        for planted in (np.nan, 40.0):
            x = rng.standard_normal((2, length)).astype(np.float32)
            x[0, length - length % 64 - 1] = planted
            for got, want in zip(jitted(x), _row_programs(x)):
                np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=f"{planted} in {length}")
    def whole(x):
        return x.sum(), x.max(), np.argmax(x)

    def interior(x):                       # (rows of the last axis, in parts: not one row)
        return x[1:-1, 1:-1].sum(), x[1:-1, 1:-1].max()
    for program, shapes in ((whole, ((1, 64), (1, 100), (1, 127), (3, 65536 + 12345))),   # (the last: unequal parts)
                            (interior, ((3, 66), (5, 100), (4, 129), (600, 130)))):
        jitted_whole = flowjit.jit(program)
        for shape in shapes:
            x = rng.standard_normal(shape)
            for got, expected in zip(jitted_whole(x), program(x)):
                np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-9, err_msg=f"shape {shape}")
    g = flowjit.Graph()
    with g.as_default():
        rows = flowjit.placeholder((None, None), np.float32, name="rows")
        fetches = _row_programs(rows)
    session = flowjit.Session(g)
    for length in (1000, 130, 64, 40, 17, 1, 1000):          # (long to short and back)
        x = rng.standard_normal((4, length)).astype(np.float32)
        for got, want in zip(session.run(list(fetches), {rows: x}), _row_programs(x)):
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6, err_msg=f"fed length {length}")


def test_a_compiled_program_refuses_arrays_of_other_shapes_or_dtypes():
    """Kernels are written for the traced shapes (a row kernel's last block reads the row's last
    64 elements), so ``lower(x).compile()`` checks its arguments, as a compiled jax function does."""
    x = np.random.default_rng(2).standard_normal((3, 1000)).astype(np.float32)
    run = flowjit.jit(lambda a: a.sum(axis=1)).lower(x).compile()
    np.testing.assert_allclose(run(x)[0], x.sum(axis=1), rtol=1e-5)
    for other in (x[:, :10].copy(), x.astype(np.float64)):
        with pytest.raises(flowjit.ShapeError, match=r"compiled for %\w+: float32\[3, 1000\], called with "):
            run(other)
    with pytest.raises(flowjit.ShapeError, match="compiled for 1 arrays, called with 2"):
        run(x, x)
