"""Variables: program order per variable, compiled (fused, unfused, on two devices) equal to the
interpreter and to numpy, reads that never alias results, in-place writes where nothing can tell,
and clear errors."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import flowjit
from flowjit.compiler import ir
from flowjit.errors import OpTypeError, ShapeError, TraceError, TracerConversionError

from variable_helpers import MODES, TWO


def line_of(marker: str) -> int:
    """The line of this file holding ``marker`` (a comment on the line an error points at)."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()
    return next(number for number, text in enumerate(lines, start=1) if marker in text and "line_of" not in text)


@pytest.mark.parametrize("mode", MODES)
def test_a_counter_incremented_once_per_call_counts_every_call(mode):
    counter = flowjit.Variable(np.int64(0), name="counter")

    @flowjit.jit(**MODES[mode])
    def step():
        counter.assign_add(1)
        return counter.value()

    for call in range(1, 1001):
        assert step() == call
    assert counter.numpy() == 1000 and counter.numpy().dtype == np.int64


@pytest.mark.parametrize("mode", MODES)
def test_an_exponential_moving_average_over_batches_equals_numpys(mode):
    # Kernels round each op as numpy does when they may not contract a*b+c into one rounding
    # (fma=False); the batches' means are exact (integers, 8 rows), so the results are too.
    rng = np.random.default_rng(1)
    batches = [rng.integers(-50, 50, (8, 5)).astype(np.float64) for _ in range(40)]
    decay = 0.9
    average = flowjit.Variable(np.zeros(5), name="average")

    @flowjit.jit(fma=False, **MODES[mode])
    def update(batch):
        average.assign(decay * average + (1 - decay) * batch.mean(axis=0))
        return average

    want = np.zeros(5)
    for batch in batches:
        want = decay * want + (1 - decay) * batch.mean(axis=0)
        got = update(batch)
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(average.numpy(), want)


@pytest.mark.parametrize("mode", MODES)
def test_operations_on_one_variable_happen_in_program_order(mode):
    v = flowjit.Variable(np.arange(4.0), name="v")

    @flowjit.jit(**MODES[mode])
    def f(x):
        before = v * 1.0                 # the old value, used after the assign
        v.assign(v + x)
        after = v * 1.0                  # sees the new value
        v.assign_sub(before)             # writes again: v = x
        last = v.value()
        return before, after, last

    x = np.full(4, 10.0)
    before, after, last = f(x)
    np.testing.assert_array_equal(before, np.arange(4.0))
    np.testing.assert_array_equal(after, np.arange(4.0) + 10)
    np.testing.assert_array_equal(last, x)
    np.testing.assert_array_equal(v.numpy(), x)


@pytest.mark.parametrize("mode", MODES)
def test_results_never_alias_a_variable(mode):
    v = flowjit.Variable(np.ones(3), name="v")

    @flowjit.jit(**MODES[mode])
    def f():
        old = v.value()
        v.assign_add(1.0)
        return old, v.value(), v.T

    old, new, view = f()
    old[...] = -1
    new[...] = -1
    view[...] = -1
    np.testing.assert_array_equal(v.numpy(), [2.0, 2.0, 2.0])
    old, new, view = f()
    np.testing.assert_array_equal(old, [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(new, [3.0, 3.0, 3.0])


def test_variables_are_found_in_closures_globals_attributes_and_argument_pytrees():
    class Model:
        def __init__(self):
            self.scale = flowjit.Variable(np.float32(2), name="scale")

    model = Model()
    params = {"w": flowjit.Variable(np.ones((2, 3), np.float32), name="w"),
              "b": flowjit.Variable(np.zeros(3, np.float32), name="b")}

    @flowjit.jit
    def forward(params, x):
        y = x @ params["w"] + params["b"]
        params["b"].assign_add(np.float32(1))
        GLOBAL_STEP.assign_add(1)
        return y * model.scale

    x = np.ones((4, 2), np.float32)
    np.testing.assert_array_equal(forward(params, x), np.full((4, 3), 4, np.float32))
    np.testing.assert_array_equal(forward(params, x), np.full((4, 3), 6, np.float32))
    assert GLOBAL_STEP.numpy() >= 2
    others = {"w": flowjit.Variable(np.full((2, 3), 3, np.float32)), "b": flowjit.Variable(np.zeros(3, np.float32))}
    np.testing.assert_array_equal(forward(others, x), np.full((4, 3), 12, np.float32))   # its own trace
    np.testing.assert_array_equal(params["b"].numpy(), [2, 2, 2])
    np.testing.assert_array_equal(others["b"].numpy(), [1, 1, 1])


GLOBAL_STEP = flowjit.Variable(0, name="global_step")


def test_outside_a_jitted_function_variables_act_at_once_with_numpys_semantics():
    v = flowjit.Variable([1.0, 2.0], name="eager")
    assert v.name.startswith("eager") and v.shape == (2,) and v.dtype == np.float64
    np.testing.assert_array_equal(v * 2 + 1, [3.0, 5.0])
    np.testing.assert_array_equal(np.exp(v), np.exp([1.0, 2.0]))
    np.testing.assert_array_equal(np.concatenate([v, v]), [1.0, 2.0, 1.0, 2.0])
    assert float(v.sum()) == 3.0 and v[1] == 2.0
    assert v.assign_add(1) is v
    v.assign_sub(np.array([0.5, 0.5]))
    np.testing.assert_array_equal(v.numpy(), [1.5, 2.5])
    copy = v.numpy()
    copy[0] = 99
    np.asarray(v)[0] = 99
    np.testing.assert_array_equal(v.numpy(), [1.5, 2.5])
    with pytest.raises(TraceError, match=r"v.assign_add\(x\)"):
        v += 1
    with pytest.raises(OpTypeError, match="changes only through"):
        np.add(v, 1, out=v)


def test_variable_names_are_unique():
    a = flowjit.Variable(1.0, name="same")
    b = flowjit.Variable(2.0, name="same")
    assert a.name != b.name and b.name.startswith("same_")


def test_assigning_a_wrong_shape_or_dtype_names_the_variable_the_types_and_the_line():
    v = flowjit.Variable(np.zeros((2, 3), np.float32), name="weights")

    @flowjit.jit
    def wrong_shape(x):
        v.assign(x)  # wrong shape here
        return x

    with pytest.raises(ShapeError) as error:
        wrong_shape(np.zeros(3, np.float32))
    message = str(error.value)
    assert f"test_variables.py:{line_of('# wrong shape here')}" in message
    assert "Variable 'weights' is f32[2,3]" in message and "f32[3]" in message

    @flowjit.jit
    def wrong_dtype(x):
        v.assign(x)  # wrong dtype here
        return x

    with pytest.raises(OpTypeError) as error:
        wrong_dtype(np.zeros((2, 3), np.float64))
    assert f"test_variables.py:{line_of('# wrong dtype here')}" in str(error.value)
    assert "f64[2,3]" in str(error.value)
    with pytest.raises(ShapeError, match=r"Variable 'weights' is f32\[2,3\]"):
        v.assign(np.zeros(4, np.float32))
    with pytest.raises(OpTypeError, match="same_kind"):
        flowjit.Variable(np.zeros(2, np.int32), name="ints").assign_add(0.5)

    @flowjit.jit
    def concrete():
        return v.numpy()

    with pytest.raises(TracerConversionError, match="numpy"):
        concrete()

    @flowjit.jit
    def create():
        return flowjit.Variable(1.0)

    with pytest.raises(TraceError, match="outside"):
        create()


def test_an_update_is_written_in_place_by_the_kernel_that_computes_it():
    w = flowjit.Variable(np.ones(1000, np.float32), name="w")
    buffer = w._buffer.value

    @flowjit.jit
    def sgd(g, lr):
        w.assign_sub(lr * g)
        return g

    g = np.linspace(-1, 1, 1000).astype(np.float32)
    lowered = sgd.lower(g, np.float32(0.5))
    source = lowered.executable.driver_source
    kernels = [node for node in lowered.fused.nodes if node.op is ir.ops.fused]
    assert len(kernels) == 1                                   # the update is one kernel...
    assert "wrote it in place" in source and "np.copyto" not in source    # ...writing w itself
    sgd(g, np.float32(0.5))
    np.testing.assert_array_equal(w.numpy(), np.float32(1) - np.float32(0.5) * g)
    assert w._buffer.value is buffer


def test_a_matmul_updates_its_variable_in_place_even_when_it_reads_it():
    w = flowjit.Variable(np.arange(9.0).reshape(3, 3), name="mm_w")

    @flowjit.jit
    def step(x, lr):
        w.assign(w - lr * (x.T @ (x @ w)))       # BLAS reads w; the epilogue writes w
        return x

    x = np.linspace(-1, 1, 6).reshape(2, 3)
    source = step.lower(x, 0.1).executable.driver_source
    assert source.count("wrote it in place") == 1 and "np.copyto" not in source
    want = np.arange(9.0).reshape(3, 3)
    for _ in range(3):
        want = want - 0.1 * (x.T @ (x @ want))
        step(x, 0.1)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12)

    @flowjit.jit
    def square(x):
        w.assign(w @ w)                        # out= overlapping an operand: numpy copies first
        return x

    want = w.numpy() @ w.numpy()
    square(x)
    np.testing.assert_allclose(w.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("update", ["transposed", "reversed", "row_broadcast", "old_value_later", "summed"])
@pytest.mark.parametrize("fuse", [True, False])
def test_updates_that_read_the_old_value_elsewhere_equal_numpy(update, fuse):
    """A kernel may write a variable in place only where every read of the old value is at the
    index it writes: these read it transposed, reversed, broadcast from one row, after the
    write, or reduced."""
    start = np.arange(16.0).reshape(4, 4)
    v = flowjit.Variable(start, name="square")
    updates = {"transposed": lambda old: (old.T + 1, None),
               "reversed": lambda old: (old[::-1] * 2, None),
               "row_broadcast": lambda old: (old - old[:1], None),
               "old_value_later": lambda old: (old * 3, lambda: old + 1),
               "summed": lambda old: (old / old.sum(), None)}

    @flowjit.jit(fuse=fuse)
    def f():
        new, later = updates[update](v.value())
        v.assign(new)
        return later() if later is not None else v.value()

    want_new, later = updates[update](start)
    np.testing.assert_array_equal(f(), later() if later is not None else want_new)
    np.testing.assert_array_equal(v.numpy(), want_new)


def test_a_variable_on_either_device_gets_send_and_recv():
    for device in TWO:
        v = flowjit.Variable(np.zeros(3), name="placed", device=device)

        @flowjit.jit(devices=TWO)
        def f(x):
            with flowjit.device("cpu:1" if device == "cpu:0" else "cpu:0"):
                y = np.tanh(x) * 2
            v.assign_add(y)
            return v.value()

        x = np.linspace(-1, 1, 3)
        np.testing.assert_array_equal(f(x), np.tanh(x) * 2)
        np.testing.assert_array_equal(f(x), np.tanh(x) * 4)
        parts = f.lower(x).stage_graphs("partitioned")
        for graph in parts:
            for node in graph.nodes:
                if node.op in (ir.ops.read_variable, ir.ops.assign_variable):
                    assert node.device.endswith(device)
        assert any(node.op is ir.ops.send for graph in parts for node in graph.nodes)


def test_reads_and_writes_of_one_variable_are_colocated_by_placement():
    v = flowjit.Variable(np.ones(4), name="colocated")

    @flowjit.jit(devices=TWO, placement="random", placement_seed=3)
    def f(x):
        v.assign(v * x)
        return v + 1

    for seed in range(6):
        lowered = flowjit.jit(f.fun, devices=TWO, placement="random", placement_seed=seed).lower(np.ones(4))
        devices = {node.device for node in lowered.placed.nodes
                   if node.op in (ir.ops.read_variable, ir.ops.assign_variable)}
        assert len(devices) == 1


@pytest.mark.parametrize("mode", MODES)
def test_checkpoints_save_and_restore_variables(tmp_path, mode):
    w = flowjit.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="ckpt_w")
    step = flowjit.Variable(np.int64(7), name="ckpt_step")

    @flowjit.jit(**MODES[mode])
    def train(g):
        w.assign_sub(g)
        step.assign_add(1)
        return w

    for variables in ([w, step], {"weights": w, "step": step}):
        checkpoint = flowjit.Checkpoint(variables)
        saved = (w.numpy(), step.numpy())
        checkpoint.save(tmp_path / str(type(variables).__name__), 1)
        train(np.ones((2, 3), np.float32))
        assert step.numpy() == saved[1] + 1
        restored = checkpoint.restore(tmp_path / str(type(variables).__name__))
        assert restored.step == 1
        np.testing.assert_array_equal(w.numpy(), saved[0])
        assert step.numpy() == saved[1]
        np.testing.assert_array_equal(train(np.ones((2, 3), np.float32)), saved[0] - 1)   # compiled sees it
    other = flowjit.Checkpoint({"weights": flowjit.Variable(np.zeros(3, np.float32)), "step": step})
    with pytest.raises(flowjit.CheckpointError, match=r"variable 'weights' is float32\[3\]"):
        other.restore(tmp_path / "dict")


@pytest.mark.parametrize("mode", MODES)
def test_a_read_used_after_the_next_write_keeps_the_old_value(mode):
    v = flowjit.Variable(np.arange(3.0), name="stale")

    @flowjit.jit(**MODES[mode])
    def f(x):
        old = v.value()
        v.assign(x * 2)
        return old * 10 + v          # old is read after the write: it must not see it

    np.testing.assert_array_equal(f(np.ones(3)), np.arange(3.0) * 10 + 2)
    np.testing.assert_array_equal(f(np.ones(3)), np.full(3, 22.0))


@pytest.mark.parametrize("mode", MODES)
def test_one_kernel_output_stored_into_several_variables(mode):
    a, b, c = (flowjit.Variable(np.zeros(4, np.float32), name=name) for name in ("many_a", "many_b", "many_c"))

    @flowjit.jit(**MODES[mode])
    def f(x):
        y = np.abs(x)
        a.assign(y)
        z = np.abs(y) + 1
        b.assign(z)
        c.assign(z)
        return y

    x = np.array([-1, 2, -3, 4], np.float32)
    np.testing.assert_array_equal(f(x), np.abs(x))
    for variable, want in ((a, np.abs(x)), (b, np.abs(x) + 1), (c, np.abs(x) + 1)):
        np.testing.assert_array_equal(variable.numpy(), want, err_msg=variable.name)


# -- a variable on one device read by kernels on another -----------------------------------------
def read_copies(lowered) -> tuple[int, int, int]:
    """(reads, sends of a read, copies the reads make) of a two-device program."""
    executable = lowered.executable
    graphs = lowered.stage_graphs("fused")
    reads = [node for graph in graphs for node in graph.nodes if node.op is ir.ops.read_variable]
    sends = [node for graph in graphs for node in graph.nodes if node.op is ir.ops.send
             and node.inputs[0].producer in reads]
    copies = sum(executable.kernels[(part, node.name)].driver_source.count(".copy()")
                 for part, graph in enumerate(graphs) for node in graph.nodes if node in reads)
    return len(reads), len(sends), copies


@pytest.mark.parametrize("device", TWO)
def test_a_variable_read_by_another_device_is_sent_once_and_copied_only_when_it_must(device):
    other = "cpu:0" if device == "cpu:1" else "cpu:1"
    w = flowjit.Variable(np.linspace(-1, 1, 16).reshape(4, 4), name="far", device=device)
    x = np.linspace(0, 1, 12).reshape(3, 4)

    @flowjit.jit(devices=TWO)
    def uses(x):
        with flowjit.device(other):
            y = np.tanh(x @ w) + w.sum()
            z = w * 2
        return y, z

    # one read, one send, one recv shared by three kernels; no copy: nothing writes w, w is no result
    assert read_copies(uses.lower(x)) == (1, 1, 0)
    wv = w.numpy()
    for _ in range(2):
        y, z = uses(x)
        np.testing.assert_allclose(y, np.tanh(x @ wv) + wv.sum(), rtol=1e-12)
        np.testing.assert_array_equal(z, wv * 2)

    @flowjit.jit(devices=TWO)
    def returns(x):
        with flowjit.device(other):
            y = x @ w
        return y, w.T                            # the value itself leaves the call: a copy

    assert read_copies(returns.lower(x)) == (1, 1, 1)
    y, view = returns(x)
    view[...] = 0
    np.testing.assert_array_equal(w.numpy(), wv)

    @flowjit.jit(devices=TWO)
    def writes(x):
        with flowjit.device(other):
            y = x @ w
        w.assign(w * 0.5)                        # the other device may still read the old value: a copy
        return y

    assert read_copies(writes.lower(x)) == (1, 1, 1)
    np.testing.assert_allclose(writes(x), x @ wv, rtol=1e-12)
    np.testing.assert_allclose(writes(x), x @ (wv * 0.5), rtol=1e-12)


ON_TWO_DEVICES = {"fused": {"devices": TWO}, "unfused": {"devices": TWO, "fuse": False},
                  "interpreter": {"devices": TWO, "backend": "interpreter"}}


@pytest.mark.parametrize("device", TWO)
@pytest.mark.parametrize("mode", ON_TWO_DEVICES)
def test_state_on_either_device_while_the_arithmetic_runs_on_the_other(mode, device):
    """The counter, the moving average and program order, with the variables on ``device`` and
    the batch's mean and the reads' uses on the other: numpy's results exactly."""
    other = "cpu:0" if device == "cpu:1" else "cpu:1"
    average = flowjit.Variable(np.zeros(5), name="far_average", device=device)
    counter = flowjit.Variable(np.int64(0), name="far_counter", device=device)
    v = flowjit.Variable(np.arange(4.0), name="far_v", device=device)
    decay = 0.9

    @flowjit.jit(fma=False, **ON_TWO_DEVICES[mode])
    def update(batch, x):
        with flowjit.device(other):
            mean = batch.mean(axis=0)
        average.assign(decay * average + (1 - decay) * mean)
        counter.assign_add(1)
        with flowjit.device(other):
            before = v * 1.0                  # the old value, used after the assign
        v.assign(v + x)
        with flowjit.device(other):
            after = v * 1.0                   # the new one
        return counter.value(), average, before, after

    rng = np.random.default_rng(2)
    want_average, want_v = np.zeros(5), np.arange(4.0)
    for call in range(1, 16):
        batch = rng.integers(-50, 50, (8, 5)).astype(np.float64)
        x = np.full(4, float(call))
        count, got_average, before, after = update(batch, x)
        want_average = decay * want_average + (1 - decay) * batch.mean(axis=0)
        assert count == call
        np.testing.assert_array_equal(got_average, want_average)
        np.testing.assert_array_equal(before, want_v)
        want_v = want_v + x
        np.testing.assert_array_equal(after, want_v)
    np.testing.assert_array_equal(average.numpy(), want_average)
    np.testing.assert_array_equal(v.numpy(), want_v)
    assert counter.numpy() == 15
    if mode != "interpreter":
        graphs = update.lower(batch, x).stage_graphs("partitioned")
        for graph in graphs:
            for node in graph.nodes:
                if node.op in (ir.ops.read_variable, ir.ops.assign_variable):
                    assert node.device.endswith(device), node
        assert any(node.op is ir.ops.send for graph in graphs for node in graph.nodes)


def test_profile_updates_variables_once_as_a_call_does():
    """profile() warms up with a first run; the variable updates of that run are undone, so a
    profiled call of a counter counts once."""
    hits = flowjit.Variable(np.zeros(2, np.int64), name="profiled_hits")

    def count(x):
        hits.assign_add(np.ones(2, np.int64))
        return x * 2

    x = np.arange(4.0)
    result, trace = flowjit.jit(count).profile(x)
    np.testing.assert_array_equal(result, x * 2)
    np.testing.assert_array_equal(hits.numpy(), [1, 1])
    assert trace["traceEvents"]
    flowjit.jit(count)(x)
    np.testing.assert_array_equal(hits.numpy(), [2, 2])
