"""flowjit.optim against hand-written numpy references of torch.optim's formulas (and torch itself
when it is installed), over several steps, compiled fused and unfused and run eagerly; and the
compiled update of many parameters: few kernels, each variable written in place.

Tolerances: float64 within 1e-12 relative (the same formulas, reassociated nowhere); float32
within 2e-6 relative plus 1e-6 absolute after 5 steps (float rounding of the same formulas;
the gradients themselves are summed in another order than the hand-written ones)."""

import math

import numpy as np
import pytest

import flowjit
from flowjit import ir, optim
from flowjit.errors import ArgumentError

SHAPES = [(5, 4), (4,), (4, 3), (3,)]
STEPS = 5


def loss(params, x, y):
    hidden = np.tanh(x @ params[0] + params[1])
    return np.mean((hidden @ params[2] + params[3] - y) ** 2)


def loss_and_grads(params, x, y):
    """The loss and its gradients by hand (the reference side does not use flowjit.grad)."""
    w1, b1, w2, b2 = params
    hidden = np.tanh(x @ w1 + b1)
    error = hidden @ w2 + b2 - y
    d_out = 2 * error / error.size
    d_hidden = (d_out @ w2.T) * (1 - hidden ** 2)
    return np.mean(error ** 2), [x.T @ d_hidden, d_hidden.sum(0), hidden.T @ d_out, d_out.sum(0)]


# -- torch.optim's formulas, written out for numpy (torch/optim/sgd.py, adam.py: the single-tensor path) --
def torch_sgd(lr, momentum=0.0, nesterov=False, weight_decay=0.0):
    def step(params, grads, state, t):
        out = []
        for index, (p, g) in enumerate(zip(params, grads)):
            if weight_decay:
                g = g + weight_decay * p
            if momentum:
                buffer = g.copy() if t == 1 else state[index] * momentum + g
                state[index] = buffer
                g = g + momentum * buffer if nesterov else buffer
            out.append(p - lr * g)
        return out
    return step


def torch_adam(lr, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False):
    def step(params, grads, state, t):
        out = []
        for index, (p, g) in enumerate(zip(params, grads)):
            if decoupled:
                p = p * p.dtype.type(1 - lr * weight_decay)
            elif weight_decay:
                g = g + weight_decay * p
            m, v = state.get(index, (np.zeros_like(p), np.zeros_like(p)))
            m = m + (1 - b1) * (g - m)                               # exp_avg.lerp_(grad, 1 - beta1)
            v = v * b2 + (1 - b2) * (g * g)                          # exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2)
            state[index] = (m, v)
            step_size = lr / (1 - b1 ** t)                           # Python floats, as torch's
            correction = math.sqrt(1 - b2 ** t)
            denominator = np.sqrt(v) / p.dtype.type(correction) + eps
            out.append(p - p.dtype.type(step_size) * (m / denominator))
        return out
    return step


CASES = {
    "sgd": (lambda: optim.SGD(0.1), torch_sgd(0.1)),
    "sgd_momentum": (lambda: optim.SGD(0.05, momentum=0.9), torch_sgd(0.05, 0.9)),
    "sgd_nesterov_decay": (lambda: optim.SGD(0.05, momentum=0.8, nesterov=True, weight_decay=0.01),
                           torch_sgd(0.05, 0.8, True, 0.01)),
    "adam": (lambda: optim.Adam(0.01), torch_adam(0.01)),
    "adam_l2": (lambda: optim.Adam(0.02, b1=0.8, b2=0.99, eps=1e-6, weight_decay=0.1),
                torch_adam(0.02, 0.8, 0.99, 1e-6, 0.1)),
    "adamw": (lambda: optim.AdamW(0.01, weight_decay=0.1), torch_adam(0.01, weight_decay=0.1, decoupled=True)),
}


def _data(dtype, seed=0):
    rng = np.random.default_rng(seed)
    start = [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]
    return start, rng.standard_normal((8, 5)).astype(dtype), rng.standard_normal((8, 3)).astype(dtype)


ALL_RUNS = ([(case, dtype, "fused") for case in sorted(CASES) for dtype in (np.float64, np.float32)]
            + [(case, np.float64, "eager") for case in sorted(CASES)]
            + [(case, np.float64, "unfused") for case in ("sgd_nesterov_decay", "adamw")])
# Each Adam run compiles kernels of its own (the moments ride in the matmul epilogues): 12 to 18 s
# of a cold run each.  make test runs float32 for adamw only (Adam's formulas and the decoupled
# decay; sgd_nesterov_decay-float32 has the L2 decay in float32) and unfused for
# sgd_nesterov_decay only; ``make test-slow`` runs these too (test_more_optimiser_runs).
SWEEP_RUNS = [("adam", np.float32, "fused"), ("adam_l2", np.float32, "fused"), ("adamw", np.float64, "unfused")]
RUNS = [run for run in ALL_RUNS if run not in SWEEP_RUNS]


def _run_id(run) -> str:
    case, dtype, path = run
    return f"{case}-{np.dtype(dtype).name}-{path}"


@pytest.mark.parametrize("case, dtype, path", RUNS, ids=[_run_id(run) for run in RUNS])
def test_optimisers_follow_torch_formulas_over_several_steps(case, dtype, path):
    check_optimiser_run(case, dtype, path)


@pytest.mark.sweep
@pytest.mark.parametrize("case, dtype, path", SWEEP_RUNS, ids=[_run_id(run) for run in SWEEP_RUNS])
def test_more_optimiser_runs(case, dtype, path):
    """test_optimisers_follow_torch_formulas_over_several_steps on SWEEP_RUNS (a sweep: ``make
    test-slow`` runs it)."""
    check_optimiser_run(case, dtype, path)


def check_optimiser_run(case, dtype, path) -> None:
    make, reference = CASES[case]
    start, x, y = _data(dtype)
    params = [flowjit.Variable(value, name=f"optim_{case}") for value in start]
    optimizer = make()

    def step(x, y):
        return optimizer.minimize(loss, params, x, y)
    run = step if path == "eager" else flowjit.jit(step, fuse=path == "fused")
    want, state = [value.copy() for value in start], {}
    rtol, atol = (1e-12, 1e-14) if dtype == np.float64 else (2e-6, 1e-6)
    for t in range(1, STEPS + 1):
        value = run(x, y)
        want_loss, grads = loss_and_grads(want, x, y)
        np.testing.assert_allclose(value, want_loss, rtol=rtol, err_msg=f"loss at step {t}")
        want = reference(want, grads, state, t)
        for variable, expected in zip(params, want):
            assert variable.dtype == dtype
            np.testing.assert_allclose(variable.numpy(), expected, rtol=rtol, atol=atol,
                                       err_msg=f"{variable.name} after step {t}")
    assert int(optimizer.step_count.numpy()) == STEPS
    names = [variable.name for variable in optimizer.variables()]
    assert names[0].endswith("/step") and names[1].endswith("/lr")
    assert len(names) == 2 + len(optimizer.slot_names) * len(params)


def test_against_torch_itself():
    torch = pytest.importorskip("torch")
    start, x, y = _data(np.float32, seed=1)
    makers = {"sgd": (lambda: optim.SGD(0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
                      lambda ps: torch.optim.SGD(ps, 0.05, momentum=0.9, nesterov=True, weight_decay=0.01)),
              "adam": (lambda: optim.Adam(0.01), lambda ps: torch.optim.Adam(ps, 0.01)),
              "adamw": (lambda: optim.AdamW(0.01, weight_decay=0.1), lambda ps: torch.optim.AdamW(ps, 0.01,
                                                                                                  weight_decay=0.1))}
    for name, (ours, theirs) in makers.items():
        params = [flowjit.Variable(value, name=f"torch_{name}") for value in start]
        optimizer = ours()
        step = flowjit.jit(lambda x, y: optimizer.minimize(loss, params, x, y))
        tensors = [torch.tensor(value, requires_grad=True) for value in start]
        reference = theirs(tensors)
        for _ in range(STEPS):
            step(x, y)
            reference.zero_grad()
            hidden = torch.tanh(torch.from_numpy(x) @ tensors[0] + tensors[1])
            ((hidden @ tensors[2] + tensors[3] - torch.from_numpy(y)) ** 2).mean().backward()
            reference.step()
        for variable, tensor in zip(params, tensors):
            np.testing.assert_allclose(variable.numpy(), tensor.detach().numpy(), rtol=2e-6, atol=1e-7,
                                       err_msg=name)


@pytest.mark.parametrize("make", [lambda: optim.SGD(0.1, momentum=0.9), lambda: optim.Adam(0.01)],
                         ids=["sgd_momentum", "adam"])
def test_the_update_of_many_parameters_is_a_few_kernels_writing_in_place(make):
    """24 parameters of 3 shapes, gradients as arguments: the elementwise updates (parameters,
    slots) land in one kernel per shape plus the step count's, and every variable is written in
    place by the kernel that computes it."""
    shapes = [(6, 5), (5,), (3, 2, 4)] * 8
    rng = np.random.default_rng(2)
    params = [flowjit.Variable(rng.standard_normal(shape), name="many") for shape in shapes]
    optimizer = make()

    @flowjit.jit
    def update(grads):
        optimizer.apply(params, grads)
        return grads[0]

    grads = [rng.standard_normal(shape) for shape in shapes]
    lowered = update.lower(grads)
    kernels = [node for node in lowered.fused.nodes if node.op is ir.ops.fused]
    assert len(kernels) <= len(set(shapes)) + 2, lowered.as_text("kernels").splitlines()[0]
    written = len(params) * (1 + len(optimizer.slot_names)) + 1
    source = lowered.executable.driver_source
    assert source.count("wrote it in place") == written and "np.copyto" not in source
    before = [p.numpy() for p in params]
    update(grads)
    assert not np.array_equal(params[0].numpy(), before[0])


def test_a_learning_rate_variable_changes_without_a_retrace():
    lr = flowjit.Variable(np.float64(0.1), name="optim_lr")
    w = flowjit.Variable(np.ones(3), name="optim_lr_w")
    optimizer = optim.SGD(lr)
    step = flowjit.jit(lambda g: optimizer.apply([w], [g]))
    step(np.ones(3))
    lr.assign(0.5)
    step(np.ones(3))
    np.testing.assert_allclose(w.numpy(), 1 - 0.1 - 0.5)
    assert len(step._traces) == 1


def test_errors_name_the_parameter():
    with pytest.raises(ArgumentError, match=r"parameter '1' is a ndarray; an optimiser updates flowjit.Variables"):
        optim.SGD(0.1).apply([flowjit.Variable(np.ones(2), name="e_w"), np.ones(2)], [np.ones(2), np.ones(2)])
    with pytest.raises(ArgumentError, match=r"the gradients' structure differs"):
        optim.Adam().apply({"w": flowjit.Variable(np.ones(2), name="e_w2")}, [np.ones(2)])
    with pytest.raises(ArgumentError, match=r"SGD\(momentum=-1\): must be a finite number >= 0"):
        optim.SGD(0.1, momentum=-1)
    with pytest.raises(ArgumentError, match=r"Adam\(b2=1.0\): must be in \[0, 1\)"):
        optim.Adam(b2=1.0)
    with pytest.raises(ArgumentError, match=r"nesterov=True\) needs a momentum"):
        optim.SGD(0.1, nesterov=True)
    with pytest.raises(ArgumentError, match=r"only floating-point variables are trained"):
        optim.SGD(0.1).init([flowjit.Variable(np.arange(3), name="e_int")])
