"""Variables that live on cluster tasks: steps against one process, reads and assigns from
the driver, checkpoints of variables on tasks, a task restarted with its variables lost and
restored (conftest's session cluster: ps, worker 0, worker 1)."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import ops
from conftest import needs_ray

pytestmark = [needs_ray, pytest.mark.xdist_group("ray")]

WORKER0, WORKER1, PS = "/job:worker/task:0", "/job:worker/task:1", "/job:ps/task:0"
LOCAL_NAMES = [f"{task}/device:cpu:0" for task in (PS, WORKER0, WORKER1)]


def _model(prefix: str, device=PS):
    """Two variables (on ``device``) and a step that reads them on the workers and updates them."""
    with flowjit.device(device) if device else _nothing():
        w = flowjit.Variable(np.arange(6, dtype=np.float32).reshape(2, 3) / 6, name=f"{prefix}_w")
        b = flowjit.Variable(np.zeros(3, np.float32), name=f"{prefix}_b")

    def step(x):
        with flowjit.device(WORKER0):
            h = np.tanh(x @ w + b)
        with flowjit.device(WORKER1):
            g = h.sum(axis=0) * 0.1
        w.assign_sub(x.T @ h * 0.01)
        b.assign_add(g)
        return h.sum()
    return w, b, step


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _batch(index: int) -> np.ndarray:
    return np.random.default_rng(index).uniform(-1, 1, (4, 2)).astype(np.float32)


def _reference(prefix: str, steps: int):
    """The same model in one process, on the reference interpreter: losses, final values."""
    w, b, step = _model(prefix, device=None)
    jitted = flowjit.jit(step, backend="interpreter")
    losses = [float(jitted(_batch(index))) for index in range(steps)]
    return losses, w.numpy(), b.numpy()


def _task_values(cluster, task, names):
    return cluster._ray.get(cluster.actors()[task].get_variables.remote(names), timeout=10)


def test_variables_live_on_their_task_and_steps_equal_one_process(cluster):
    w, b, step = _model("on_ps")
    jitted = flowjit.jit(step, devices=cluster)
    losses = [float(jitted(_batch(index))) for index in range(3)]
    want_losses, want_w, want_b = _reference("on_ps_reference", 3)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-5)              # fetched from the ps task
    np.testing.assert_allclose(b.numpy(), want_b, rtol=1e-5)
    held = _task_values(cluster, PS, [w.name, b.name])                    # the ps process holds them
    np.testing.assert_array_equal(held[w.name], w.numpy())
    assert f"on task {PS} of Cluster(" in repr(w)
    # reads from the workers go through send/recv like any tensor: the ps partition sends them
    lowered = jitted.lower(_batch(0))
    [ps_part] = [graph for graph in lowered.partitioned.partitions if graph.attrs["device"].startswith(PS)]
    reads = {node.output for node in ps_part.nodes if node.op is ops.read_variable}
    assert any(node.op is ops.send and node.inputs[0] in reads for node in ps_part.nodes)
    # assigns and reads from the driver act on the task's value
    w.assign(np.ones((2, 3), np.float32))
    b.assign_add(np.full(3, 2.0, np.float32))
    np.testing.assert_array_equal(_task_values(cluster, PS, [w.name])[w.name], np.ones((2, 3), np.float32))
    np.testing.assert_allclose(b.numpy(), want_b + 2, rtol=1e-6)
    x = _batch(7)
    expected = np.tanh(x @ np.ones((2, 3), np.float32) + b.numpy()).sum()
    np.testing.assert_allclose(float(jitted(x)), expected, rtol=1e-5)


def test_a_variable_stays_on_the_task_its_first_program_placed_it_on(cluster):
    v = flowjit.Variable(np.ones(4, np.float32), name="unpinned")

    def bump(x):
        v.assign_add(x)
        return v * 2

    first = flowjit.jit(bump, devices=cluster, placement="random", placement_seed=3)
    np.testing.assert_array_equal(first(np.ones(4, np.float32)), np.full(4, 4.0, np.float32))
    home = v._buffer.home
    assert home is not None and home.device in LOCAL_NAMES
    for seed in range(4):                                 # other placements are pinned to that device
        other = flowjit.jit(lambda x: v * x, devices=cluster, placement="random", placement_seed=seed)
        placed = other.lower(np.ones(4, np.float32)).placed
        assert {node.device for node in placed.nodes if node.op is ops.read_variable} == {home.device}
        np.testing.assert_array_equal(other(np.full(4, 3.0, np.float32)), np.full(4, 6.0, np.float32))
    with pytest.raises(flowjit.errors.FlowjitError, match=r"@lambda \(on this process's devices\) uses variable "
                                                          r"'unpinned', which lives on task /job:.* of Cluster\("):
        flowjit.jit(lambda: v + 1)()


def test_checkpoints_of_variables_on_tasks_and_a_restarted_task_that_lost_them(cluster, tmp_path):
    w, b, step = _model("ckpt")
    jitted = flowjit.jit(step, devices=cluster)
    for index in range(2):
        jitted(_batch(index))
    checkpoint = flowjit.Checkpoint([w, b])
    checkpoint.save(tmp_path, 2)
    saved = {w.name: w.numpy(), b.name: b.numpy()}
    after = float(jitted(_batch(2)))                      # the step after the checkpoint
    assert cluster.restart(PS) == [PS]
    with pytest.raises(flowjit.ClusterError, match=rf"variable 'ckpt_w' lived on task {PS}, which was restarted "
                                                   rf"since .* restore it from a checkpoint") as caught:
        w.numpy()
    assert (caught.value.task, caught.value.kind) == (PS, "lost")
    with pytest.raises(flowjit.ClusterError, match="lived on task /job:ps/task:0, which was restarted"):
        jitted(_batch(2))
    restored = checkpoint.restore(tmp_path)
    assert restored.step == 2
    np.testing.assert_array_equal(_task_values(cluster, PS, [w.name])[w.name], saved[w.name])
    assert float(jitted(_batch(2))) == after              # registered again, with the restored values


def test_a_restore_that_fails_on_one_task_changes_no_variable(cluster, tmp_path):
    """A checkpoint of variables on two tasks, restored while one of them is dead: the other
    keeps its value (nothing half-restored), and the error names the dead task."""
    with flowjit.device(WORKER0):
        first = flowjit.Variable(np.zeros(2, np.float32), name="halves_a")
    with flowjit.device(WORKER1):
        second = flowjit.Variable(np.zeros(2, np.float32), name="halves_b")
    both = flowjit.jit(lambda: (first.assign_add(np.ones(2, np.float32)), second.assign_add(np.ones(2, np.float32)),
                                first + second)[-1], devices=cluster)
    np.testing.assert_array_equal(both(), np.full(2, 2.0, np.float32))
    checkpoint = flowjit.Checkpoint([first, second])
    checkpoint.save(tmp_path, 1)
    both()
    import os
    import signal
    os.kill(cluster.pids()[WORKER1], signal.SIGKILL)
    try:
        with pytest.raises(flowjit.ClusterError, match=r"task /job:worker/task:1"):
            checkpoint.restore(tmp_path)
        np.testing.assert_array_equal(first.numpy(), np.full(2, 2.0, np.float32))    # not restored
    finally:
        cluster.restart(WORKER1)
    checkpoint.restore(tmp_path)
    np.testing.assert_array_equal(both(), np.full(2, 4.0, np.float32))


def test_shutdown_brings_the_variables_back_into_this_process(ray_session):
    v = flowjit.Variable(np.zeros(3, np.float32), name="comes_back")   # (no device: local programs use it after)
    with flowjit.Cluster({"ps": 1}) as small:
        flowjit.jit(lambda x: v.assign_add(x), devices=small)(np.arange(3, dtype=np.float32))
        assert v._buffer.home is not None
    assert v._buffer.home is None
    np.testing.assert_array_equal(v.numpy(), np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(flowjit.jit(lambda: v * 2)(), np.arange(3, dtype=np.float32) * 2)


# -- the session API ------------------------------------------------------------------------
def _graph(prefix: str, device=PS):
    g = flowjit.Graph(f"{prefix}_graph")
    with g.as_default():
        x = flowjit.placeholder((None, 3), np.float32, name="x")
        with flowjit.device(device):
            w = flowjit.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), name=f"{prefix}_w")
        with flowjit.device(WORKER0):
            h = np.tanh(x @ w)
        with flowjit.device(WORKER1):
            loss = (h * h).sum()
        update = w.assign_sub(x.T @ h * 0.1)
    return g, x, w, h, loss, update


def test_a_session_runs_a_graph_on_a_cluster_as_on_one_process(cluster):
    g, x, w, h, loss, update = _graph("sess")
    gr, xr, wr, hr, lossr, updater = _graph("sess_reference")
    sess = flowjit.Session(g, devices=cluster)
    reference = flowjit.Session(gr, devices=LOCAL_NAMES, backend="interpreter")
    feeds = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    for rows in (2, 1, 2):                                # a fed size that changes re-plans, on the tasks too
        got = sess.run([loss, h], {x: feeds[:rows]}, targets=[update])
        want = reference.run([lossr, hr], {xr: feeds[:rows]}, targets=[updater])
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    np.testing.assert_allclose(sess.run(h, {x: feeds}), reference.run(hr, {xr: feeds}), rtol=1e-5)   # no update
    np.testing.assert_allclose(sess.run(w), reference.run(wr), rtol=1e-5)
    assert w._buffer.home is not None and w._buffer.home.task == PS
    np.testing.assert_allclose(_task_values(cluster, PS, [w.name])[w.name], wr.numpy(), rtol=1e-5)


def test_a_profile_on_a_cluster_updates_the_variables_once(cluster):
    w, b, step = _model("profiled")
    jitted = flowjit.jit(step, devices=cluster)
    loss, trace = jitted.profile(_batch(0))
    want_losses, want_w, want_b = _reference("profiled_reference", 1)
    np.testing.assert_allclose(float(loss), want_losses[0], rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-5)          # the warm-up's update was undone
    np.testing.assert_allclose(b.numpy(), want_b, rtol=1e-5)
    ops_run = {event["args"]["op"] for event in trace["traceEvents"] if event["ph"] == "X"}
    assert {"send", "recv"} <= ops_run
