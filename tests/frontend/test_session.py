"""Graph mode: flowjit.Graph, placeholders, Session.run with feeds and fetches (whitepaper §4.2)."""

from __future__ import annotations

import numpy as np
import pytest

import flowjit
from flowjit import random as fr

# The one-device path falls back from the graphs' cpu:1 requests (soft placement), as it says.
pytestmark = pytest.mark.filterwarnings("ignore::flowjit.frontend.jit.PlacementFallbackWarning")

TWO = ["cpu:0", "cpu:1"]
PATHS = [dict(backend="interpreter", devices=TWO), dict(devices=TWO), dict(fuse=False, devices=TWO),
         dict(soft_placement=True)]
PATH_IDS = ["interpreted", "fused-two-devices", "unfused-two-devices", "fused-one-device"]


def _mlp_graph(device="/device:cpu:1"):
    g = flowjit.Graph("mlp")
    with g.as_default():
        x = flowjit.placeholder((None, 4), np.float32, name="x")
        w = flowjit.placeholder((4, 3), np.float32, name="w")
        with flowjit.device(device):            # heeded where the session has cpu:1
            hidden = np.tanh(x @ w)
        scores = hidden.sum(axis=1)
        peak = (x * 2).max(axis=0)
    return g, x, w, hidden, scores, peak


def _inputs(rows=2):
    x = (np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) - 3) / 8
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    return x, w


@pytest.mark.parametrize("options", PATHS, ids=PATH_IDS)
def test_run_matches_numpy_with_nested_fetches(options):
    g, x, w, hidden, scores, peak = _mlp_graph()
    xv, wv = _inputs()
    with flowjit.Session(g, **options) as sess:
        result = sess.run({"scores": scores, "more": [peak, ("tanh:0", "x:0")]}, {x: xv, "w:0": wv})
    assert set(result) == {"scores", "more"} and isinstance(result["more"], list)
    assert isinstance(result["more"][1], tuple)
    np.testing.assert_allclose(result["scores"], np.tanh(xv @ wv).sum(axis=1), rtol=2e-5)
    np.testing.assert_array_equal(result["more"][0], (xv * 2).max(axis=0))
    np.testing.assert_allclose(result["more"][1][0], np.tanh(xv @ wv), rtol=2e-5)
    np.testing.assert_array_equal(result["more"][1][1], xv)
    assert result["more"][1][1] is not xv                     # a fetched feed is a copy


@pytest.mark.parametrize("options", PATHS, ids=PATH_IDS)
def test_a_fetched_memmap_feed_and_a_view_of_it_are_copies(options, tmp_path):
    """A memmap (an ndarray subclass the inputs accept) fed and fetched, as is or reshaped,
    never hands back the caller's file."""
    g = flowjit.Graph("memmap_feed")
    with g.as_default():
        x = flowjit.placeholder((2, 3), np.float32, name="x")
        flat = x.reshape(6)
    mapped = np.memmap(tmp_path / "x.bin", np.float32, "w+", shape=(2, 3))
    mapped[:] = np.arange(6, dtype=np.float32).reshape(2, 3)
    with flowjit.Session(g, **options) as sess:
        fed, reshaped = sess.run([x, flat], {x: mapped})
    assert not np.shares_memory(fed, mapped) and not np.shares_memory(reshaped, mapped)
    np.testing.assert_array_equal(reshaped, np.arange(6, dtype=np.float32))


@pytest.mark.parametrize("options", PATHS, ids=PATH_IDS)
def test_a_fetched_intermediate_that_was_fed_is_a_copy_too(options):
    g, x, w, hidden, scores, peak = _mlp_graph()
    xv, wv = _inputs()
    fed = np.tanh(xv @ wv)
    with flowjit.Session(g, **options) as sess:
        got, total = sess.run([hidden, scores], {hidden: fed})
    assert not np.shares_memory(got, fed)
    np.testing.assert_array_equal(got, fed)
    np.testing.assert_allclose(total, fed.sum(axis=1), rtol=1e-6)


def test_tensor_names_are_node_and_port():
    g, x, w, hidden, scores, peak = _mlp_graph()
    assert (x.name, w.name, hidden.name, scores.name) == ("x:0", "w:0", "tanh:0", "sum:0")
    assert g.placeholders == ["x", "w"]
    assert g.tensor("sum").name == "sum:0" and g.tensor("matmul:0").shape == (flowjit.ir.DYNAMIC, 3)
    text = str(g)
    assert "%x: f32[?,4]" in text and "%matmul = matmul %x, %w : f32[?,3]" in text
    assert str(flowjit.ir.parse(text)) == text                   # ? prints and parses back


def test_partial_execution_runs_only_what_the_fetches_need():
    g, x, w, hidden, scores, peak = _mlp_graph()
    xv, wv = _inputs()
    sess = flowjit.Session(g, devices=TWO)
    np.testing.assert_array_equal(sess.run(peak, {x: xv}), (xv * 2).max(axis=0))      # w not needed
    pruned = sess.lower(peak, {x: xv}).graph
    assert [v.name for v in pruned.inputs] == ["x"]
    assert {node.op.name for node in pruned.nodes} == {"constant", "mul", "max"}


def test_a_fed_intermediate_replaces_its_producer():
    g, x, w, hidden, scores, peak = _mlp_graph()
    fed = np.full((3, 3), 0.5, np.float32)
    sess = flowjit.Session(g, devices=TWO)
    np.testing.assert_allclose(sess.run(scores, {hidden: fed}), np.full(3, 1.5, np.float32))
    pruned = sess.lower(scores, {"tanh:0": fed}).graph
    assert [node.op.name for node in pruned.nodes] == ["sum"]          # no matmul, no tanh, no x or w
    assert [v.type for v in pruned.inputs] == [flowjit.ir.TensorType((3, 3), np.float32)]


def test_each_signature_compiles_once_and_new_sizes_compile_no_kernel():
    g, x, w, hidden, scores, peak = _mlp_graph(device=None)
    xv, wv = _inputs()
    sess = flowjit.Session(g)                    # one device, one driver: one executable per compile
    sess.run(scores, {x: xv, w: wv})
    before = flowjit.stats()
    sess.run(scores, {w: wv, x: xv})                          # same signature, other feed order
    sess.run("sum:0", {"x": xv + 1, "w:0": wv})              # names for the same tensors
    after = flowjit.stats()
    assert after["executables"] == before["executables"] and after["kernel_compiles"] == before["kernel_compiles"]
    assert after["traces"] == before["traces"]
    big, _ = _inputs(rows=5)
    np.testing.assert_allclose(sess.run(scores, {x: big, w: wv}), np.tanh(big @ wv).sum(axis=1), rtol=2e-5)
    resized = flowjit.stats()
    assert resized["executables"] == after["executables"] + 1          # a driver for the new size...
    assert resized["kernel_compiles"] == after["kernel_compiles"]      # ...with the same kernels
    sess.run([scores, peak], {x: xv, w: wv})                 # other fetches: another plan
    assert flowjit.stats()["executables"] == resized["executables"] + 1


def test_none_dimensions_through_views_and_slices():
    g = flowjit.Graph()
    with g.as_default():
        x = flowjit.placeholder((None, 3), np.float64, name="x")
        v = flowjit.placeholder(None, np.float64, name="v")
        first_column = x[:, 0]
        tail = x[1:] - x[:-1]
        flat = x.reshape(-1) * 2
        last_row = x[-1]
        ones = np.ones_like(x).sum(axis=0)
        noisy = v + fr.uniform(fr.key(3), v.shape)
    sess = flowjit.Session(g, devices=TWO)
    for rows in (2, 5):
        xv = np.arange(rows * 3, dtype=np.float64).reshape(rows, 3) ** 2
        vv = np.linspace(0, 1, rows)       # ones_like(x) and v.shape hold ? sizes: one fed size for all
        got = sess.run([first_column, tail, flat, last_row, ones, noisy], {x: xv, v: vv})
        want = [xv[:, 0], xv[1:] - xv[:-1], xv.reshape(-1) * 2, xv[-1], np.ones_like(xv).sum(axis=0),
                vv + fr.uniform(fr.key(3), vv.shape)]
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)


def test_random_in_graph_mode_on_two_devices():
    g = flowjit.Graph()
    with g.as_default():
        key = flowjit.placeholder((2,), np.uint32, name="key")
        a, b = fr.split(key)
        with flowjit.device("/device:cpu:1"):
            z = fr.normal(a, (3, 4), dtype=np.float32)
        u = fr.uniform(b, (3, 4), dtype=np.float32) * z
    k = fr.key(99)
    first, second = fr.split(k)
    want = fr.uniform(second, (3, 4), dtype=np.float32) * fr.normal(first, (3, 4), dtype=np.float32)
    for options in PATHS:
        np.testing.assert_array_equal(flowjit.Session(g, **options).run(u, {key: k}), want)


def test_a_jitted_functions_graph_runs_in_a_session():
    @flowjit.jit
    def f(x, y):
        return np.exp(x) + y, (x * y).sum()

    xv, yv = np.linspace(0, 1, 6).reshape(2, 3), np.ones((2, 3))
    lowered = f.lower(xv, yv)
    sess = flowjit.Session(lowered.graph, devices=["cpu:0", "cpu:1"])
    got = sess.run(lowered.graph.outputs, {"x": xv, "y:0": yv})
    want = f(xv, yv)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
    np.testing.assert_allclose(flowjit.Session(lowered).run("exp:0", {"x": xv}), np.exp(xv), rtol=1e-12)
    # and a session's program prints at every stage, like the jit path's
    session_lowered = sess.lower(lowered.graph.outputs[0], {"x": xv, "y": yv})
    assert session_lowered.as_text("traced") == \
        "graph @f(%x: f64[2,3], %y: f64[2,3]) -> (f64[2,3]) {\n" + \
        "\n".join(line for line in lowered.as_text("traced").splitlines()[1:-1]
                  if "mul" not in line and "sum" not in line and "return" not in line) + \
        "\n  return %add\n}\n"
    assert "fused" in session_lowered.as_text("fused")


def test_python_values_take_the_placeholders_dtype():
    g = flowjit.Graph()
    with g.as_default():
        x = flowjit.placeholder((2,), np.float32, name="x")
        y = x * 3
    assert flowjit.Session(g, devices=TWO).run(y, {x: [1, 2]}).dtype == np.float32


def test_errors_name_the_tensor_and_the_line():
    g, x, w, hidden, scores, peak = _mlp_graph()
    xv, wv = _inputs()
    sess = flowjit.Session(g, devices=TWO)
    with pytest.raises(flowjit.SessionError, match=r"test_session.py:\d+: fetch 'sum:0' needs placeholder 'w' "
                                                   r"\(f32\[4,3\]\), which is not fed"):
        sess.run(scores, {x: xv})
    with pytest.raises(flowjit.SessionError, match=r"fetch 'tahn:0' names no tensor of graph @mlp .*"
                                                   r"did you mean 'tanh:0'"):
        sess.run("tahn:0", {x: xv, w: wv})
    with pytest.raises(flowjit.SessionError, match=r"feed 'q' names no tensor"):
        sess.run(scores, {"q": xv})
    with pytest.raises(flowjit.SessionError, match=r"the feed for placeholder 'x' \(f32\[\?,4\]\) is float64\[2, 4\]: "
                                                   r"its dtype must be float32"):
        sess.run(scores, {x: xv.astype(np.float64), w: wv})
    with pytest.raises(flowjit.SessionError, match=r"the feed for placeholder 'w' \(f32\[4,3\]\) is float32\[3, 3\]: "
                                                   r"its shape must be \(4, 3\)"):
        sess.run(scores, {x: xv, w: wv[:3]})
    with pytest.raises(flowjit.SessionError, match=r"the feed for placeholder 'x' \(f32\[\?,4\]\) is float32\[4\]: "
                                                   r"its shape must be \(None, 4\)"):
        sess.run(scores, {x: xv[0], w: wv})
    with pytest.raises(flowjit.SessionError, match=r"tensor 'x:0' is fed twice"):
        sess.run(scores, {x: xv, "x:0": xv, w: wv})
    other, *_ = _mlp_graph()
    with pytest.raises(flowjit.SessionError, match="of another graph"):
        flowjit.Session(other).run(scores, {x: xv, w: wv})


def test_graph_building_errors():
    with pytest.raises(flowjit.TraceError, match="placeholder is called outside a graph"):
        flowjit.placeholder((2,))
    with pytest.raises(flowjit.TraceError, match="inside a jitted function"):
        flowjit.jit(lambda a: a + flowjit.placeholder((2,)))(np.ones(2))
    g = flowjit.Graph()
    with g.as_default():
        flowjit.placeholder((2,), name="x")
        with pytest.raises(flowjit.ArgumentError, match="already has a node named 'x'"):
            flowjit.placeholder((2,), name="x")
        y = flowjit.placeholder((None,), name="y")
        r = y.reshape(-1, 1)
        q = flowjit.placeholder((None,), name="q")
        s = np.concatenate([y, q]).reshape(-1, 1)
    with pytest.raises(flowjit.TraceError, match="escaped"):
        y + 1                                                  # outside as_default(): not recorded
    with g.as_default():
        z = y * 2                                              # re-entered: its tensors still work
    sess = flowjit.Session(g, devices=TWO)
    np.testing.assert_array_equal(sess.run([z, r], {y: np.arange(3.0, dtype=np.float32)})[1],
                                  np.arange(3.0, dtype=np.float32).reshape(-1, 1))
    both = {y: np.arange(3.0, dtype=np.float32), q: np.arange(2.0, dtype=np.float32)}
    with pytest.raises(flowjit.SpecializeError, match=r"%reshape_1 \(reshape, traced at .*test_session.py:\d+\) "
                                                      r"holds sizes of \? dimensions .*fed different sizes \[2, 3\]"):
        sess.run(s, both)
    same = {y: np.arange(3.0, dtype=np.float32), q: np.arange(3.0, dtype=np.float32)}
    np.testing.assert_array_equal(sess.run(s, same), np.concatenate([same[y], same[q]]).reshape(-1, 1))


# -- state: variables read and assigned in a graph, run by Session.run ------------------------------
def _stateful_graph(device):
    """v and steps live on ``device`` and on the other one; reads before and after an assign."""
    other = "cpu:0" if device.endswith("1") else "cpu:1"
    g = flowjit.Graph("stateful")
    with g.as_default():
        v = flowjit.Variable(np.zeros(3, np.float32), name="v", device=device)     # made while building
        steps = flowjit.Variable(np.int64(0), name="steps", device=other)
        x = flowjit.placeholder((3,), np.float32, name="x")
        before = v * 1
        up = v.assign_add(x)
        after = v * 2
        tick = steps.assign_add(1)
    return g, v, steps, x, before, up, after, tick


@pytest.mark.parametrize("device", TWO)
@pytest.mark.parametrize("options", PATHS, ids=PATH_IDS)
def test_fetching_operations_runs_them_in_program_order_and_state_persists(options, device):
    g, v, steps, x, before, up, after, tick = _stateful_graph(device)
    ones = np.ones(3, np.float32)
    sess = flowjit.Session(g, **options)
    assert sess.run(up, {x: ones}) is None                    # an operation's result is None...
    np.testing.assert_array_equal(v.numpy(), ones)            # ...and it ran
    assert steps.numpy() == 0                                 # tick was not fetched: pruned, not run
    # one run, fetches in any order: the read before the assign sees the old value, after it the new
    for fetches in ([before, up, after], [after, up, before]):
        got = dict(zip(("a", "b", "c"), sess.run(fetches, {x: ones})))
        old, new = v.numpy() - 1, v.numpy()
        values = {id(before): old, id(after): new * 2}
        for name, fetch in zip(("a", "b", "c"), fetches):
            if fetch is up:
                assert got[name] is None
            else:
                np.testing.assert_array_equal(got[name], values[id(fetch)])
    np.testing.assert_array_equal(v.numpy(), 3 * ones)
    np.testing.assert_array_equal(sess.run(before), 3 * ones)           # needs no assign, no feed
    np.testing.assert_array_equal(v.numpy(), 3 * ones)
    np.testing.assert_array_equal(sess.run(after, {x: ones}), 8 * ones)  # a read after the assign runs it
    # a Variable fetched: its value once the run's operations on it are done; targets run for effect
    got = sess.run({"v": v, "op": up.name, "steps": steps}, {"x:0": 2 * ones}, targets=[tick])
    assert got["op"] is None and got["steps"] == 1
    np.testing.assert_array_equal(got["v"], 6 * ones)
    assert sess.run(None, {x: ones}, targets=[up, tick.name]) is None
    assert steps.numpy() == 2
    np.testing.assert_array_equal(v.numpy(), 7 * ones)
    np.testing.assert_array_equal(sess.run(v), 7 * ones)                  # no operation: just the value


def test_pruning_keeps_the_assigns_a_fetch_needs_and_drops_the_others():
    g, v, steps, x, before, up, after, tick = _stateful_graph("cpu:1")
    sess = flowjit.Session(g, devices=TWO)
    ones = np.ones(3, np.float32)

    def assigns(fetches, feeds=None, targets=None):
        graph = sess.lower(fetches, feeds, targets=targets).graph
        return sorted(node.attrs["var"] for node in graph.nodes if node.op is flowjit.ir.ops.assign_variable)

    assert assigns(before) == []
    assert assigns(up, {x: ones}) == [v.name]
    assert assigns(after, {x: ones}) == [v.name]
    assert assigns(steps, targets=[tick]) == [steps.name]
    assert assigns([before, tick]) == [steps.name]
    assert [v.name for v in sess.lower(tick).graph.inputs] == []          # x is not needed
    with pytest.raises(flowjit.SessionError, match=r"test_session.py:\d+: operation 'assign_variable' "
                                                   r"\(assign_variable\) needs placeholder 'x' \(f32\[3\]\), which "
                                                   r"is not fed"):
        sess.run(None, targets=[up])
    with pytest.raises(flowjit.SessionError, match="target 0 'x:0' is a placeholder, not an operation"):
        sess.run(before, {x: ones}, targets=[x])
    with pytest.raises(flowjit.SessionError, match="a target 0 is an operation .* not int"):
        sess.run(before, targets=[3])
    with pytest.raises(flowjit.SessionError, match="nothing to fetch"):
        sess.run(None)


def test_runs_from_two_threads_lose_no_update():
    import threading
    g, v, steps, x, before, up, after, tick = _stateful_graph("cpu:0")
    with g.as_default():
        big = flowjit.placeholder((60, 60), np.float64, name="big")
        slow = (big @ big).sum()                    # BLAS between the read and the write
        new = steps + 1 + (slow * 0).astype(np.int64)
        store = steps.assign(new)
    sess = flowjit.Session(g, devices=TWO)
    feeds = {big: np.ones((60, 60))}
    sess.run(store, feeds)
    errors = []

    def runs():
        try:
            for _ in range(30):
                sess.run([store, up], {**feeds, x: np.ones(3, np.float32)})
        except BaseException as error:          # noqa: B036  (re-raised below)
            errors.append(error)
    threads = [threading.Thread(target=runs, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads) and not errors, errors
    # each run adds 2: `new` reads steps after tick (built before it), so it runs tick first
    assert steps.numpy() == 2 + 2 * 60
    np.testing.assert_array_equal(v.numpy(), np.full(3, 60, np.float32))
