"""Reverse mode (flowjit.grad, ir.gradients) checked against central finite differences in
float64, on hand-written programs for every rule and on random programs; compiled fused and
unfused, and through the reference interpreter.

Tolerances: an analytic gradient matches the central difference with step 1e-6 to within
1e-6 relative (plus 1e-7 absolute): the difference's own error is O(h**2 f''') + O(eps / h)."""

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck
from scipy.special import erf, expit

import flowjit
from flowjit.compiler.ir.gradients import GradientError
from random_programs import random_programs

RTOL, ATOL = 1e-6, 1e-7


def numeric_gradient(fun, args, argnum, step=1e-6):
    x = np.array(args[argnum], dtype=np.float64)
    result = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        shifted = []
        for sign in (1, -1):
            moved = x.copy()
            moved[index] += sign * step
            call = list(args)
            call[argnum] = moved
            with np.errstate(all="ignore"):
                shifted.append(float(fun(*call)))
        result[index] = (shifted[0] - shifted[1]) / (2 * step)
    return result


def check(fun, *args, argnums=(0,), paths=("fused", "unfused", "interpreter")):
    """Every path's gradient matches the finite differences (and numpy's value)."""
    for path in paths:
        options = {"fused": {}, "unfused": {"fuse": False}, "interpreter": {"backend": "interpreter"}}[path]
        jitted = flowjit.jit(flowjit.value_and_grad(fun, argnums=argnums), **options)
        value, grads = jitted(*args)
        np.testing.assert_allclose(value, fun(*args), rtol=1e-12, err_msg=path)
        for argnum, got in zip(argnums, grads):
            want = numeric_gradient(fun, args, argnum)
            np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{path}, argument {argnum}")


RNG = np.random.default_rng(7)
A = RNG.uniform(0.2, 0.9, (3, 4))          # inside every unary op's domain
B = RNG.uniform(-2, 2, (3, 4))
ROW = RNG.uniform(-1, 1, (4,))
COLUMN = RNG.uniform(-1, 1, (3, 1))

UNARY = {
    "negative": np.negative, "abs": np.abs, "sqrt": np.sqrt, "square": np.square, "reciprocal": np.reciprocal,
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2, "log10": np.log10,
    "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos,
    "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "erf": erf, "expit": expit,
    "cbrt": np.cbrt, "arcsinh": np.arcsinh, "arccosh": lambda x: np.arccosh(x + 1), "arctanh": np.arctanh,
    "fabs": lambda x: np.fabs(x - 0.5), "deg2rad": np.deg2rad, "rad2deg": np.rad2deg,
    "cube": lambda x: x ** 3, "half_power": lambda x: x ** 0.5, "power_of_2": lambda x: 2.0 ** x,
    "floor_times": lambda x: np.floor(4 * x) * x, "sign_times": lambda x: np.sign(x - 0.5) * x,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_rules(name):
    f = UNARY[name]
    check(lambda x: (f(x) * B).sum(), A, paths=("fused", "interpreter"))


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "power": lambda a, b: np.power(a, b), "maximum": np.maximum, "minimum": np.minimum, "fmax": np.fmax,
    "fmin": np.fmin, "arctan2": np.arctan2, "mod": np.mod, "fmod": np.fmod, "logaddexp": np.logaddexp,
    "logaddexp2": np.logaddexp2, "copysign": np.copysign, "heaviside_times": lambda a, b: np.heaviside(b, 0.5) * a,
    "where": lambda a, b: np.where(a > 0.5, a * 2, b), "clip": lambda a, b: np.clip(b, -1, a),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_rules_with_broadcasting(name):
    f = BINARY[name]
    check(lambda a, b: (f(a, b) * B).sum(), A, COLUMN + 1.5, argnums=(0, 1), paths=("fused", "interpreter"))
    check(lambda a, b: f(a, b).sum(), A, ROW + 1.5, argnums=(0, 1), paths=("interpreter",))


REDUCTIONS = {
    "sum": lambda x: x.sum(axis=1), "sum_all": lambda x: x.sum(), "mean_keep": lambda x: x.mean(axis=0, keepdims=True),
    "max": lambda x: x.max(axis=1), "min_all": lambda x: x.min(), "prod": lambda x: x.prod(axis=0),
    "var": lambda x: x.var(axis=1), "std_ddof": lambda x: x.std(axis=0, ddof=1), "var_all": lambda x: np.var(x),
}


# The reduction and shape rules run fused and through the interpreter here; unfused (a kernel
# per op of the forward and the backward program: a third of these tests' cold compile time)
# under ``make test-slow`` (test_reduction_and_shape_rules_unfused).  The row patterns and the
# small network below, and the variables test, check the unfused path in make test.
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_rules(name):
    f = REDUCTIONS[name]
    check(lambda x: np.sum(np.sin(f(x)) * 3), B, paths=("fused", "interpreter"))


def test_a_cast_passes_the_cotangent_in_the_inputs_dtype():
    """(Finite differences cannot see through float32 rounding: checked exactly instead.)"""
    got = flowjit.grad(lambda x: np.sum((x.astype(np.float32) * 2).astype(np.float64) * B))(A)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, (B.astype(np.float32) * 2).astype(np.float64), rtol=1e-7)


def test_max_shares_the_cotangent_between_ties_as_the_central_difference_sees_it():
    x = np.array([1.0, 3.0, 3.0, 2.0])
    np.testing.assert_allclose(flowjit.grad(lambda x: np.max(x))(x), [0, 0.5, 0.5, 0])
    np.testing.assert_allclose(flowjit.grad(lambda x: np.maximum(x, 2.0).sum())(x), [0, 1, 1, 0.5])


SHAPES = {
    "reshape": lambda x: x.reshape(2, 6) * np.arange(12.0).reshape(2, 6),
    "transpose": lambda x: x.T @ np.ones((3, 2)),
    "broadcast": lambda x: np.broadcast_to(x[:1], (5, 4)) * 2,
    "slice": lambda x: x[1:, ::2] * 3, "reversed": lambda x: x[::-1, ::-3] ** 2,
    "index": lambda x: x[2] * x[0, 1], "new_axis": lambda x: x[:, None, :] * x[None, :, :],
    "concatenate": lambda x: np.concatenate([x, x[:1] * 2, np.sin(x)], axis=0) ** 2,
    "stack": lambda x: np.stack([x, x * x], axis=1),
    "matmul": lambda x: x @ x.T, "matvec": lambda x: x @ ROW, "vecmat": lambda x: ROW @ x.T,
    "batched": lambda x: np.matmul(np.stack([x, 2 * x]), x.T), "dot": lambda x: np.dot(x[0], x[1]),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_and_matmul_rules(name):
    f = SHAPES[name]
    check(lambda x: np.sum(np.tanh(f(x))), B, paths=("fused", "interpreter"))


@pytest.mark.sweep
@pytest.mark.parametrize("name", sorted(REDUCTIONS) + sorted(SHAPES))
def test_reduction_and_shape_rules_unfused(name):
    """The rest of test_reduction_rules and test_shape_and_matmul_rules: unfused (a sweep:
    ``make test-slow`` runs it)."""
    if name in REDUCTIONS:
        f = REDUCTIONS[name]
        check(lambda x: np.sum(np.sin(f(x)) * 3), B, paths=("unfused",))
    else:
        f = SHAPES[name]
        check(lambda x: np.sum(np.tanh(f(x))), B, paths=("unfused",))


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def log_softmax(x):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def layernorm(x, gamma):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma


def mlp_loss(w1, b1, w2, x, labels):
    hidden = np.maximum(x @ w1 + b1, 0)
    return -np.mean(np.sum(labels * log_softmax(hidden @ w2), axis=1))


def test_row_patterns_and_a_small_network():
    check(lambda x: np.sum(softmax(x) * B), B)
    check(lambda x: np.sum(log_softmax(x) * B), B)
    check(lambda x, g: np.sum(layernorm(x, g) * B), B, ROW, argnums=(0, 1))
    rng = np.random.default_rng(3)
    x, labels = rng.standard_normal((6, 5)), np.eye(3)[rng.integers(0, 3, 6)]
    w1, b1, w2 = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal((4, 3))
    check(mlp_loss, w1, b1, w2, x, labels, argnums=(0, 1, 2))


def test_second_order_gradients():
    x = np.linspace(-1.5, 1.5, 7)
    second = flowjit.grad(lambda x: flowjit.grad(lambda y: np.sum(np.tanh(y) * y ** 2))(x).sum())(x)
    np.testing.assert_allclose(second, numeric_gradient(
        lambda x: np.sum(2 * x * np.tanh(x) + x * x * (1 - np.tanh(x) ** 2)), [x], 0), rtol=1e-6, atol=1e-7)


def test_pytrees_argnums_and_aux():
    params = {"w": B.copy(), "b": ROW.copy()}

    def loss(params, x):
        out = np.tanh(x @ params["w"] + params["b"])
        return np.mean(out ** 2), out.shape
    (value, aux), grads = flowjit.value_and_grad(loss, has_aux=True)(params, A.T)
    assert set(grads) == {"w", "b"} and grads["w"].shape == B.shape and aux == (4, 4)
    np.testing.assert_allclose(value, loss(params, A.T)[0])
    np.testing.assert_allclose(grads["b"], numeric_gradient(lambda b: loss({"w": B, "b": b}, A.T)[0], [ROW], 0),
                               rtol=RTOL, atol=ATOL)
    gx, gy = flowjit.grad(lambda x, y: np.sum(x * y), argnums=(0, 1))(A, B)
    np.testing.assert_allclose(gx, B)
    np.testing.assert_allclose(gy, A)


def test_closed_over_arrays_are_constants_and_grad_works_inside_jit():
    @flowjit.jit
    def step(w, x):
        return w - 0.1 * flowjit.grad(lambda w: np.sum((x @ w) ** 2))(w)
    w, x = B[:, :2], A.T
    np.testing.assert_allclose(step(w, x), w - 0.1 * 2 * x.T @ (x @ w), rtol=1e-12)
    # x also reaches the loss through the closure: only the path through the argument counts
    np.testing.assert_allclose(flowjit.grad(lambda y: np.sum(y * A))(A), A)


def test_clear_errors():
    with pytest.raises(GradientError, match=r"must return a float scalar, got f64\[3,4\].*test_gradients.py"):
        flowjit.grad(lambda x: x * 2)(A)
    with pytest.raises(GradientError, match=r"argument 0 is i64\[3\]; only floating-point"):
        flowjit.grad(lambda x: np.sum(x * 1.5))(np.arange(3))
    with pytest.raises(GradientError, match=r"argnums 2 is out of range"):
        flowjit.grad(lambda x: np.sum(x), argnums=2)(A)


def test_ops_without_a_rule_are_named_with_the_users_line():
    from flowjit.compiler.ir import ops
    from flowjit.compiler.ir.ops.base import _REGISTRY, Op, OpKind, register
    from flowjit.compiler.ir.ops.lowering import typed
    double = register(Op("double_for_grad_test", OpKind.ELEMENTWISE, 1, lambda types, attrs: [types[0]],
                         lambda arrays, attrs: [arrays[0] * 2], lowering=typed(lambda c, a: f"({a} * 2)")))
    try:
        def f(x):
            from flowjit.frontend.tracer import current_trace
            return np.sum(current_trace().emit1(double, [x]))
        with pytest.raises(GradientError, match=r"op 'double_for_grad_test' .* no gradient rule; it was traced at "
                                                r".*test_gradients.py"):
            flowjit.grad(f)(A)
    finally:
        del _REGISTRY["double_for_grad_test"]
    assert ops.add.gradient is not None


# -- random programs -----------------------------------------------------------------------------------
def _loss_of(program, weights):
    def loss(*args):
        total = 0.0
        for output, weight in zip(program(*args), weights):
            if output.dtype.kind == "f":
                total = total + np.sum(output.astype(np.float64) * weight)
        return total
    return loss


def _smooth_agreement(loss, args, argnum, analytic):
    """Entries where two step sizes agree (the loss is smooth there) must match the gradient."""
    fine, coarse = numeric_gradient(loss, args, argnum, 1e-6), numeric_gradient(loss, args, argnum, 1e-5)
    smooth = np.isfinite(fine) & np.isclose(fine, coarse, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(analytic)[smooth], fine[smooth], rtol=1e-5, atol=1e-6)
    return int(smooth.sum())


# The differentiable unary steps (floor, sign, isnan... have zero or no gradients; the hand-written
# tests above cover every rule once), each drawn often enough to be caught when its rule is wrong.
DIFFERENTIABLE = ["negative", "abs", "exp", "tanh", "sin", "cos", "sqrt_abs", "log1p_abs", "square", "expit",
                  "erf", "transpose", "flatten", "stride", "last", "times_2_5", "plus_1", "three_minus",
                  "reciprocal_f", "pow_2", "repeat", "reversed_then_matmul", "column_mean_then_concatenated",
                  "transposed_then_transposed", "shifted_then_matmul"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
          derandomize=True)
@given(program=random_programs(max_steps=8, dtypes=[np.float64], unary=DIFFERENTIABLE))
def test_random_programs_match_finite_differences(program):
    """Random programs of float64 inputs, the loss a weighted sum of their float results,
    differentiated through the interpreter."""
    rng = np.random.default_rng(0)
    args = program.make_args(rng)
    with np.errstate(all="ignore"):
        outputs = program(*args)
    weights = [rng.uniform(-1, 1, np.shape(output)) for output in outputs]
    loss = _loss_of(program, weights)
    if not any(np.asarray(o).dtype.kind == "f" for o in outputs) or not np.isfinite(loss(*args)):
        return
    argnums = tuple(range(len(args)))
    with np.errstate(all="ignore"):
        grads = flowjit.jit(flowjit.grad(loss, argnums=argnums), backend="interpreter")(*args)
    for argnum, analytic in zip(argnums, grads):
        _smooth_agreement(loss, args, argnum, analytic)


# -- variables as differentiation targets ---------------------------------------------------------------
def _variables(prefix, **values):
    return {key: flowjit.Variable(value, name=f"{prefix}_{key}") for key, value in values.items()}


def _mixed_loss(params, x):
    hidden = np.tanh(x @ params["w"] + params["b"])
    return np.sum(hidden ** 2 * params["scale"])


@pytest.mark.parametrize("path", ["outside_jit", "fused", "unfused", "interpreter"])
def test_variables_and_arrays_as_targets_match_finite_differences(path):
    """A pytree mixing variables and arrays: gradients come back as arrays in its structure."""
    rng = np.random.default_rng(11)
    w, b, scale, x = rng.standard_normal((3, 2)), rng.standard_normal(2), rng.uniform(0.5, 1, 2), A.T
    params = {**_variables(f"grad_{path}", w=w, b=b), "scale": scale}
    if path == "outside_jit":
        grads = flowjit.grad(_mixed_loss)(params, x)
    else:
        options = {"fused": {}, "unfused": {"fuse": False}, "interpreter": {"backend": "interpreter"}}[path]
        grads = flowjit.jit(lambda params, x: flowjit.grad(_mixed_loss)(params, x), **options)(params, x)
    assert set(grads) == {"w", "b", "scale"} and all(type(g) is np.ndarray for g in grads.values())
    plain = {"w": w, "b": b, "scale": scale}
    for key in plain:
        def along(value, key=key):
            return _mixed_loss({**plain, key: value}, x)
        np.testing.assert_allclose(grads[key], numeric_gradient(along, [plain[key]], 0), rtol=RTOL, atol=ATOL,
                                   err_msg=f"{path}: {key}")
    np.testing.assert_array_equal(params["w"].numpy(), w)        # reading for a gradient writes nothing


def test_reads_of_a_target_variable_through_a_closure_are_differentiated_too():
    """The loss reads ``b`` as its argument and again through a closure: both uses count, as
    TensorFlow's gradient of a variable sees every read."""
    b = flowjit.Variable(ROW.copy(), name="grad_closure_b")

    def loss(bias):
        return np.sum(np.sin(A + bias) * b)          # `bias` is b, and b is read through the closure
    got = flowjit.grad(loss)(b)
    np.testing.assert_allclose(got, numeric_gradient(lambda v: np.sum(np.sin(A + v) * v), [ROW], 0),
                               rtol=RTOL, atol=ATOL)
    # A variable not differentiated stays a constant of the differentiation.
    c = flowjit.Variable(ROW.copy(), name="grad_closure_c")
    np.testing.assert_allclose(flowjit.grad(lambda v: np.sum(v * c))(ROW * 2), np.broadcast_to(ROW, (4,)))


def test_an_sgd_step_on_variables_inside_jit_updates_them_in_place():
    rng = np.random.default_rng(5)
    w0, x, y = rng.standard_normal((4, 2)), rng.standard_normal((8, 4)), rng.standard_normal((8, 2))
    w = flowjit.Variable(w0, name="grad_sgd_w")

    def loss(w, x, y):
        return np.mean((x @ w - y) ** 2)

    @flowjit.jit
    def step(x, y):
        value, g = flowjit.value_and_grad(loss)(w, x, y)
        w.assign_sub(0.1 * g)
        return value
    want = w0.copy()
    for _ in range(3):
        value = step(x, y)
        np.testing.assert_allclose(value, loss(want, x, y), rtol=1e-12)
        want = want - 0.1 * (2 / y.size) * x.T @ (x @ want - y)
        np.testing.assert_allclose(w.numpy(), want, rtol=1e-12)


def test_variable_targets_errors():
    counter = flowjit.Variable(np.arange(3), name="grad_integer_variable")
    with pytest.raises(GradientError, match=r"argument 0 is i64\[3\]; only floating-point"):
        flowjit.grad(lambda v: np.sum(v * 1.5))(counter)
    v = flowjit.Variable(ROW.copy(), name="grad_scoped_read")

    def loss(value):
        with flowjit.control_dependencies([value]):
            again = v * 2
        return np.sum(value * again)
    with pytest.raises(GradientError, match=r"Variable 'grad_scoped_read' is differentiated, but the result also "
                                            r"depends on a read of it made inside a control_dependencies scope"
                                            r".*test_gradients.py"):
        flowjit.grad(loss)(v)


# -- flowjit.gradients (graph mode, TensorFlow's form) and `flowjit dump --grad` -------------------------
def test_graph_mode_gradients_match_finite_differences_and_tensorflows_conventions():
    rng = np.random.default_rng(4)
    xb, wb, weights = rng.standard_normal((5, 4)), rng.standard_normal((4, 3)), rng.standard_normal((5, 3))
    g = flowjit.Graph()
    with g.as_default():
        x = flowjit.placeholder((None, 4), np.float64, name="x")
        w = flowjit.placeholder((4, 3), np.float64, name="w")
        z = flowjit.placeholder((2,), np.float64, name="z")
        y = np.tanh(x @ w)
        loss = (y ** 2).sum()
        gw, gx, gz = flowjit.gradients(loss, [w, x, z])               # z: no path, None (as TensorFlow)
        both = flowjit.gradients([y, loss], "w:0")                    # several ys: their sum; a name
        seed = flowjit.placeholder((None, 3), np.float64, name="seed")
        weighted = flowjit.gradients(y, w, grad_ys=seed)              # a non-scalar y, weighted
    assert gz is None and len(both) == 1
    got = flowjit.Session(g).run([gw, gx, both[0], weighted[0]], {x: xb, w: wb, "seed": weights})

    def f(expression):
        return lambda w, x: expression(np.tanh(x @ w))
    want = [numeric_gradient(f(lambda y: (y ** 2).sum()), [wb, xb], 0),
            numeric_gradient(f(lambda y: (y ** 2).sum()), [wb, xb], 1),
            numeric_gradient(f(lambda y: y.sum() + (y ** 2).sum()), [wb, xb], 0),
            numeric_gradient(f(lambda y: (y * weights).sum()), [wb, xb], 0)]
    for name, a, b in zip(["dloss/dw", "dloss/dx", "d(y, loss)/dw", "weighted"], got, want):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=name)


def test_graph_mode_gradients_errors():
    g = flowjit.Graph()
    with g.as_default():
        x = flowjit.placeholder((3,), np.float64, name="x")
        n = flowjit.placeholder((3,), np.int64, name="n")
        y = (x * 2).sum()
        with pytest.raises(GradientError, match=r"grad_y f64\[2\] does not match its y f64\[\]"):
            flowjit.gradients(y, x, grad_ys=np.ones(2))
        with pytest.raises(GradientError, match=r"x 'n:0' is i64\[3\]; only floating-point.*test_gradients.py"):
            flowjit.gradients(y, n)
        with pytest.raises(GradientError, match=r"no tensor named 'nothing:0'"):
            flowjit.gradients(y, "nothing:0")
    other = flowjit.Graph()
    with other.as_default():
        elsewhere = flowjit.placeholder((3,), np.float64, name="x")
    with pytest.raises(GradientError, match=r"different graphs"):
        flowjit.gradients(y, elsewhere)


def test_dump_grad_shows_the_gradient_graph(tmp_path):
    import subprocess
    import sys
    source = tmp_path / "model.py"
    source.write_text("import numpy as np\n\n\ndef loss(w, x):\n    return np.mean(np.tanh(x @ w) ** 2)\n")
    command = [sys.executable, "-m", "flowjit.cli", "dump", f"{source}:loss", "--arg", "w=f32[4,2]",
               "--arg", "x=f32[8,4]"]
    result = subprocess.run(command + ["--grad", "--stage", "optimized"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith("graph @loss(%w: f32[4,2], %x: f32[8,4]) -> (f32[], f32[4,2])")
    assert text.count(" = matmul ") == 2 and "transpose %x" in text       # the forward one, and dloss/dw = x.T @ ...
    both = subprocess.run(command + ["--grad", "0,1"], capture_output=True, text=True, timeout=300)
    assert both.returncode == 0 and "-> (f32[], f32[4,2], f32[8,4])" in both.stdout, both.stderr
    bad = subprocess.run(command + ["--grad", "2"], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "--grad 2: argument 2 is not given" in bad.stderr
