"""np.hypot, np.linalg.norm, np.cov and np.dot of N-d operands (frontend/numpy_arrays.py): each
against numpy on the fused and unfused compiled paths and the reference interpreter, numpy's
dtypes and special values, the errors, and gradients against finite differences."""

import numpy as np
import pytest

import flowjit
from flowjit.errors import ShapeError, UnsupportedFunctionError
from test_array_ops import GRADIENT_PATHS, PATHS, agree, line_of
from test_gradients import check

RNG = np.random.default_rng(12)
F64 = RNG.normal(size=(4, 5))
F32 = RNG.normal(size=(3, 6)).astype(np.float32)
I16 = RNG.integers(-300, 300, (4, 5)).astype(np.int16)


# -- np.hypot ---------------------------------------------------------------------------------------------
SPECIAL = np.array([0.0, -0.0, 1.0, -3.0, np.inf, -np.inf, np.nan, 1e300, -1e-300, 5e-324, 1.7e308])


def test_hypot_special_values_and_extremes_in_every_float_dtype():
    """inf beside NaN is inf (C99), 0 beside 0 is 0, and neither 1e300**2 overflows nor
    1e-300**2 underflows: numpy's answers to the bit for float16 and float32, within 2 ulp for float64."""
    x, y = np.meshgrid(SPECIAL, SPECIAL)
    x, y = x.ravel(), y.ravel()

    def f(a, b):
        return np.hypot(a, b), np.hypot(a.astype(np.float32), b.astype(np.float32)), np.hypot(a.astype(np.float16), 2.0)
    with np.errstate(all="ignore"):
        want = f(x, y)
    for path, options in PATHS.items():
        got = flowjit.jit(f, **options)(x, y)
        for result, expected in zip(got, want):
            assert result.dtype == expected.dtype, path
            assert np.array_equal(np.isnan(result), np.isnan(expected)), path
            finite = np.isfinite(expected)
            assert np.array_equal(result[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)])
            if expected.dtype == np.float64:
                np.testing.assert_array_max_ulp(result[finite], expected[finite], maxulp=2)
            else:
                assert np.array_equal(result[finite], expected[finite]), path


def test_hypot_dtypes_and_random_values():
    big = RNG.uniform(-1e3, 1e3, (64,))
    ulps = RNG.normal(size=(2, 256))

    def f(a, b, i, u):
        return np.hypot(a, b), np.hypot(i, i[::-1]), np.hypot(i > 0, True), np.hypot(u[0], u[1])
    agree(f, F64, big[:5], I16, ulps)       # int16 is float32's loop, bool float16's
    x, y = ulps
    np.testing.assert_array_max_ulp(flowjit.jit(np.hypot)(x, y), np.hypot(x, y), maxulp=2)


def test_hypot_refuses_out():
    def into(x):
        return np.hypot(x, x, out=x)
    with pytest.raises(UnsupportedFunctionError, match=r"np\.hypot: argument\(s\) out are not supported"):
        flowjit.jit(into)(F64)


# -- np.linalg.norm ---------------------------------------------------------------------------------------
def test_norm_matches_numpy_for_vectors_and_matrices():
    def f(x, y, i):
        norm = np.linalg.norm
        return (norm(x), norm(x, keepdims=True), norm(x, axis=1), norm(x, axis=-2, keepdims=True),
                norm(x[0], 2), norm(x, 1, axis=0), norm(x, np.inf, axis=1), norm(x, -np.inf, axis=1),
                norm(x, 0, axis=0), norm(x, 3, axis=1), norm(x, 0.5, axis=1),
                norm(x, "fro"), norm(x, 1), norm(x, -1), norm(x, np.inf), norm(x, -np.inf, keepdims=True),
                norm(x[None], axis=(2, 0)), norm(x[None], 1, axis=(-1, 1), keepdims=True),
                norm(y, axis=0),                     # float32 stays float32
                norm(i), norm(i, 1, axis=1), norm(i > 0, axis=0))    # integers and booleans as float64
    agree(f, F64, F32, I16)


def test_norm_errors():
    def nuclear(x):
        return np.linalg.norm(x, "nuc")  # nuc
    with pytest.raises(UnsupportedFunctionError,
                       match=r"np\.linalg\.norm: ord='nuc' of a matrix needs its singular values") as info:
        flowjit.jit(nuclear)(F64)
    assert info.value.location.line == line_of(nuclear, "nuc")

    def fro_of_vector(x):
        return np.linalg.norm(x, "fro", axis=0)
    with pytest.raises(ShapeError, match=r"np\.linalg\.norm: invalid norm order 'fro' for vectors"):
        flowjit.jit(fro_of_vector)(F64)

    def three_axes(x):
        return np.linalg.norm(x[None], 2)
    with pytest.raises(ShapeError, match=r"improper number of dimensions to norm \(3 axes of f64\[1,4,5\]\)"):
        flowjit.jit(three_axes)(F64)

    def same_axis(x):
        return np.linalg.norm(x, axis=(1, -1))
    with pytest.raises(ShapeError, match=r"np\.linalg\.norm: duplicate axes given: \(1, 1\)"):
        flowjit.jit(same_axis)(F64)


# -- np.cov -----------------------------------------------------------------------------------------------
def test_cov_matches_numpy():
    def f(x, y, i):
        return (np.cov(x), np.cov(x, rowvar=False), np.cov(x, bias=True), np.cov(x, ddof=3),
                np.cov(x[0], x[1]), np.cov(x[0]),          # 1-d: a 0-d variance
                np.cov(y, rowvar=False),                   # float32 in, float64 out
                np.cov(y, dtype=np.float32), np.cov(i, rowvar=False), np.cov(x, y[:, :5]))
    agree(f, F64, F32, I16)


def test_cov_of_observations_in_rows_centres_the_columns_in_place():
    """rowvar=False (a returns matrix, observations in rows) takes each column's mean of the
    matrix as it lies, not each row's of its transpose: a kernel reading a transpose by rows
    walks down its columns (portfolio_volatility at 4M: 73 ms, numpy's 42)."""
    graph = flowjit.jit(lambda x: np.cov(x, rowvar=False)).lower(F64).graph
    means = [node for node in graph.nodes if node.op.name == "mean"]
    assert [node.attrs["axes"] for node in means] == [(0,)] and means[0].inputs[0].producer is None, \
        flowjit.jit(lambda x: np.cov(x, rowvar=False)).lower(F64).as_text()


def test_cov_errors():
    def weighted(x):
        return np.cov(x, fweights=np.ones(5, int))
    with pytest.raises(UnsupportedFunctionError, match=r"np\.cov: argument\(s\) fweights are not supported"):
        flowjit.jit(weighted)(F64)

    def three_d(x):
        return np.cov(x[None])
    with pytest.raises(ShapeError, match=r"np\.cov: f64\[1,4,5\] has more than 2 dimensions"):
        flowjit.jit(three_d)(F64)

    def too_few(x):
        return np.cov(x[:, :1])
    with pytest.warns(RuntimeWarning, match="Degrees of freedom <= 0"):
        got = flowjit.jit(too_few, backend="interpreter")(F64)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        assert np.array_equal(got, np.cov(F64[:, :1]), equal_nan=True)


# -- np.dot of N-d operands ---------------------------------------------------------------------------------
A3 = RNG.normal(size=(2, 3, 4))
B3 = RNG.normal(size=(5, 4, 2))


def test_dot_of_nd_operands_follows_numpy_not_matmul():
    """np.dot sums over a's last axis and b's second to last and keeps every other axis of both
    (2x3x5x2 here), where matmul broadcasts the batch axes."""
    def f(a, b, v):
        return (np.dot(a, b), np.dot(a, v), np.dot(v, b), np.dot(a[0], b), np.dot(a, b[0]),
                np.dot(a, [0.2989, 0.5870, 0.1140, 1.0]),    # rgb-to-gray's spelling: a list of weights
                np.dot(a.astype(np.float32), b.astype(np.float32)),
                np.matmul(a[:, None], b[None, :2, :, :1]))
    agree(f, A3, B3, RNG.normal(size=4))


def test_matmul_with_a_constant_operand():
    """A constant operand that fusion puts inside the matmul's kernel reaches BLAS as an array
    (it was passed as None: einsum's and cov's gradients build such matmuls)."""
    def f(m):
        return (np.ones((1, 1)) @ m[:1], m @ np.eye(5), np.full((2, 4), 0.5, np.float32) @ m.astype(np.float32),
                np.exp(np.arange(4.0)[None] @ m) + 1)
    agree(f, F64)


def test_a_transposed_operand_reaches_blas_as_a_view():
    """``q @ k.T`` (attention's scores): the transpose is a view the driver hands to
    ``np.matmul`` (numpy gives BLAS the transposed layout), no kernel copies it, and the
    epilogue fuses after the matmul."""
    def scores(q, k):
        return np.exp(q @ k.T) * 2.0
    q, k = RNG.normal(size=(8, 4)), RNG.normal(size=(6, 4))
    lowered = flowjit.jit(scores).lower(q, k)
    driver = lowered.executable.driver_source
    assert "t_transpose = xp.transpose(t_k, (1, 0))" in driver and "np.matmul(t_q, t_transpose, out=" in driver, driver
    assert list(lowered.kernel_sources()) == ["k0_matmul_exp_mul"], driver
    agree(scores, q, k)


def test_dot_misaligned_shapes_name_the_dims():
    def misaligned(a, b):
        return np.dot(a, b)  # dot
    with pytest.raises(ShapeError, match=r"np\.dot: shapes \(2, 3, 4\) and \(4, 5, 2\) not aligned: "
                                         r"4 \(dim 2\) != 5 \(dim 1\)") as info:
        flowjit.jit(misaligned)(A3, B3.transpose(1, 0, 2))
    assert info.value.location.line == line_of(misaligned, "dot")


# -- gradients ----------------------------------------------------------------------------------------------
def test_gradients_of_norms_covariances_dots_and_hypot():
    """The cotangents reaching cov and dot depend on x (x itself; (2 dot + 1)): products, where
    cos and sin (each inlined into the forward and backward kernels) were a third of the cold
    compile.  Their own rules: test_gradients.py's test_unary_rules[cos], [sin]."""
    positive = RNG.uniform(0.5, 2.0, (4, 5))

    def loss(x):
        dot = np.dot(x.reshape(2, 2, 5), x.T[:, :3])
        return (np.linalg.norm(x) + np.linalg.norm(x, 3, axis=1).sum() + np.linalg.norm(x, axis=0, keepdims=True).sum()
                + (np.cov(x) * x[:, :4]).sum() + (dot * (dot + 1.0)).sum()
                + (np.hypot(x, x[::-1] - 0.3) * x).sum())
    check(loss, positive, paths=GRADIENT_PATHS)


# -- np.linalg.inv, det, solve: numpy's own LAPACK calls (compiler/ir/ops/linalg.py) ------------------------
MATRICES = RNG.normal(size=(3, 4, 4)) + 4 * np.eye(4)
RIGHT = RNG.normal(size=(3, 4, 2))
VECTOR = RNG.normal(size=4)


def test_inv_det_solve_match_numpy():
    """Stacks of matrices, a vector right-hand side (numpy 2's 1-d b) and a broadcast one,
    float32 kept, integers in float64, complex values; the results feed fused kernels."""
    agree(lambda a, b, v: (np.linalg.inv(a), np.linalg.det(a), np.linalg.solve(a, b), np.linalg.solve(a[0], v),
                           np.linalg.solve(a, b[0]), np.linalg.inv(a[0].astype(np.float32)) * 2,
                           np.linalg.det(np.round(a[1]).astype(np.int32)), np.linalg.solve(a[0] + 0j, v),
                           np.linalg.inv(a) @ b - np.linalg.solve(a, b)),
          MATRICES, RIGHT, VECTOR)


def test_linalg_errors_are_numpys():
    def square(a):
        return np.linalg.inv(a)  # square
    with pytest.raises(ShapeError, match=r"Last 2 dimensions of the array must be square") as info:
        flowjit.jit(square)(F64)
    assert info.value.location.line == line_of(square, "square")
    with pytest.raises(TypeError, match=r"array type float16 is unsupported in linalg"):
        flowjit.jit(np.linalg.det)(np.eye(2, dtype=np.float16))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        flowjit.jit(np.linalg.solve)(np.zeros((2, 2)), np.ones(2))


def test_linalg_gradients_match_finite_differences():
    def loss(a, b, v):
        return ((np.linalg.inv(a) ** 2).sum() + np.linalg.det(a).sum() + (np.linalg.solve(a, b) * b).sum()
                + (np.linalg.solve(a, v) ** 2).sum())
    check(loss, MATRICES, RIGHT, VECTOR, argnums=(0, 1, 2), paths=GRADIENT_PATHS)
