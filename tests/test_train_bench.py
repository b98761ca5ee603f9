"""The bench workload train_mlp on small shapes: every mode's step (flowjit fused and unfused,
hand-written numpy backprop, jax.jit(value_and_grad), torch.compile and torch eager with
torch.optim.SGD) matches the numpy reference step after step, and flowjit's backward runs
its elementwise work in at most 4 kernels besides the matmuls."""

import numpy as np
import pytest

import flowjit
from flowjit import ir, optim
from flowjit.bench import harness, workloads
from flowjit.bench.workloads import train_mlp_callables, train_mlp_loss, train_mlp_reference


def small_args(seed=0):
    rng = np.random.default_rng(seed)
    sizes, batch = (12, 16, 8, 5), 6
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    onehot = np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        params += [(rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32),
                   (rng.standard_normal(fan_out) * 0.1).astype(np.float32)]
    return (x, onehot, *params)


@pytest.mark.parametrize("mode", ["numpy", "fused", "unfused", "jax", "torch", "torch_eager"])
def test_every_mode_takes_the_numpy_references_steps(mode):
    if harness.available(mode):
        pytest.skip(harness.available(mode))
    args = small_args()
    call = train_mlp_callables(mode, args)
    x, onehot, *params = args
    params = [p.copy() for p in params]
    for step in range(3):
        want = train_mlp_reference(None, x, onehot, *params)
        got = harness.to_numpy(call())
        assert harness.check(got, tuple(np.asarray(w, np.float64) for w in want), "float32") is None, step
        params = list(want[1:])


def test_the_numpy_backprop_is_the_gradient():
    """The hand-written reference against flowjit.grad in float64 (itself checked against finite
    differences in test_gradients.py)."""
    x, onehot, *params = [a.astype(np.float64) for a in small_args(1)]
    grads = flowjit.grad(train_mlp_loss)(params, x, onehot)
    stepped = [p.copy() for p in params]
    workloads.train_mlp_numpy_step(stepped, x, onehot, lr=1.0)
    for before, after, gradient in zip(params, stepped, grads):
        np.testing.assert_allclose(before - after, gradient, rtol=1e-10, atol=1e-12)


def test_the_backward_elementwise_work_is_at_most_four_kernels_besides_the_matmuls():
    x, onehot, *initial = small_args()
    params = [flowjit.Variable(p, name="bench_kernels") for p in initial]
    optimizer = optim.SGD(0.01)
    step = flowjit.jit(lambda x, onehot: optimizer.minimize(train_mlp_loss, params, x, onehot))
    forward = flowjit.jit(train_mlp_loss)
    kinds = {}
    for name, jitted, arguments in (("step", step, (x, onehot)), ("forward", forward, (initial, x, onehot))):
        fused = jitted.lower(*arguments).fused
        kinds[name] = [node.attrs["plan"].kind.name for node in fused.nodes if node.op is ir.ops.fused]
    matmuls = kinds["step"].count("MATMUL")
    assert matmuls == 3 + 5                  # forward 3; backward: 3 weight gradients, 2 input gradients
    backward_others = (len(kinds["step"]) - matmuls) - (len(kinds["forward"]) - kinds["forward"].count("MATMUL"))
    assert backward_others <= 4, step.lower(x, onehot).as_text("kernels").splitlines()[0]
