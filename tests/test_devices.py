"""Devices, placement, partitioning with send/recv, and the multi-device executor, all
checked against the reference interpreter."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowjit
from flowjit.compiler.costmodel import CostModel
from flowjit.compiler.ir import ops
from flowjit.compiler.passes.place import PlacementError
from flowjit.devices import Device, DeviceError, DeviceSet, DeviceSpec, canonical
from flowjit.machine import STATIC
from flowjit.runtime.executor import ExecutionError
from corpus_sample import program_corpus_sample, sampled
from helpers import assert_same_result, tolerance_for
from programs import PROGRAMS
from random_programs import random_programs

TWO = ["cpu:0", "cpu:1"]


def _same(actual, expected, args):
    """Compiled against the interpreter, with the per-dtype tolerance the compiled tests use."""
    rtol = tolerance_for(args, expected)
    assert_same_result(actual, expected, exact=rtol == 0.0, rtol=rtol)


# -- names --------------------------------------------------------------------------------
@pytest.mark.parametrize("text, full", [
    ("cpu:1", "/job:localhost/task:0/device:cpu:1"),
    ("/device:gpu:0", "/job:localhost/task:0/device:gpu:0"),
    ("/job:worker/task:3/device:cpu:2", "/job:worker/task:3/device:cpu:2"),
    ("/cpu:0", "/job:localhost/task:0/device:cpu:0"),
])
def test_names_expand_against_the_local_job(text, full):
    assert canonical(text) == full


def test_partial_specs_constrain():
    any_gpu = DeviceSpec.parse("/device:gpu:*")
    devices = DeviceSet.of(["cpu:0", "cpu:1", "gpu:0", "gpu:1"])
    assert [d.short for d in devices.matching(any_gpu)] == ["gpu:0", "gpu:1"]
    assert [d.short for d in devices.matching(DeviceSpec.parse("/job:localhost/task:0"))] == \
        ["cpu:0", "cpu:1", "gpu:0", "gpu:1"]
    assert devices.matching(DeviceSpec.parse("/job:worker")) == []
    assert DeviceSpec.parse("/device:cpu:*").merged(DeviceSpec.parse("/device:cpu:1")).index == 1


@pytest.mark.parametrize("bad", ["cpu:x", "/job:a/bogus:1", "cpu:0:1", "1cpu"])
def test_malformed_names_are_errors(bad):
    with pytest.raises(DeviceError, match="malformed|not an index"):
        DeviceSpec.parse(bad)


def test_device_sets_reject_duplicates_and_describe_gpus_they_cannot_run(monkeypatch):
    monkeypatch.setattr("flowjit.devices._gpu_runs_here", lambda index: False)       # a machine without a GPU
    with pytest.raises(DeviceError, match="more than once"):
        DeviceSet.of(["cpu:0", "/job:localhost/task:0/device:cpu:0"])
    devices = DeviceSet.parse("cpu:0x2,gpu:0")
    assert devices["cpu:0"].threads == 2 and devices["gpu:0"].executable is False
    assert "gpu:0" in devices.describe() and "no" in devices.describe().splitlines()[-1]


# -- tracing scopes -------------------------------------------------------------------------
def test_device_scopes_nest_and_colocation_is_recorded():
    def f(x):
        with flowjit.device("/job:localhost"):
            with flowjit.device("cpu:1"):
                y = np.exp(x)
            z = y + 1
        with flowjit.colocate_with(y):
            w = z * 2
        return w
    graph = flowjit.jit(f).lower(np.ones(3, np.float32)).graph
    by_op = {node.op.name: node for node in graph.nodes}
    assert by_op["exp"].requested_device == "/job:localhost/device:cpu:1"
    assert by_op["add"].requested_device == "/job:localhost"
    assert by_op["mul"].colocation == "exp" and by_op["exp"].colocation == "exp"


def test_colocating_with_an_input_is_an_error_at_the_users_line():
    def f(x):
        with flowjit.colocate_with(x):
            return x + 1
    with pytest.raises(flowjit.TraceError, match=r"test_devices.py:\d+: colocate_with\(x\): .*inputs are not placed"):
        flowjit.jit(f).lower(np.ones(3))


# -- placement -------------------------------------------------------------------------------
def _lower(f, *args, **options):
    return flowjit.jit(f, **options).lower(*args)


def test_placement_is_deterministic_and_spreads_independent_heavy_work():
    def f(a, b):
        return np.tanh(a @ a) @ a, np.tanh(b @ b) @ b
    x = np.ones((512, 512), np.float32)
    placed = [_lower(f, x, x, devices=TWO).placed for _ in range(2)]
    assert str(placed[0]) == str(placed[1])
    devices = {node.device for node in placed[0].nodes if node.op is ops.matmul}
    assert len(devices) == 2                       # the two chains run side by side


def test_small_graphs_stay_on_one_device():
    def f(x):
        return np.exp(x) * 2 + 1
    placed = _lower(f, np.ones(8, np.float32), devices=TWO).placed
    assert {node.device for node in placed.nodes} == {canonical("cpu:0")}


def test_measured_costs_change_later_placements():
    def f(x, y):
        return np.exp(x) + 1, np.tanh(y)
    x = np.ones(64, np.float32)
    jitted = flowjit.jit(f, devices=TWO)
    before = {n.name: n.device for n in jitted.lower(x, x).placed.nodes}
    assert len(set(before.values())) == 1
    jitted.profile(x, x)
    assert jitted.costs.measured                   # every kernel's time was recorded
    for key in list(jitted.costs.measured):        # pretend both ops are very slow
        jitted.costs.measured[key] = 1.0
    after = {n.name: n.device for n in jitted.lower(x, x).placed.nodes if n.op is not ops.constant}
    assert after["exp"] != after["tanh"]           # now worth running side by side


def test_soft_placement_reports_and_hard_placement_raises():
    def f(x):
        with flowjit.device("gpu:0"):
            return np.exp(x)
    with pytest.raises(PlacementError, match=r"%exp \(exp\) requests /device:gpu:0 at .*test_devices.py"):
        _lower(f, np.ones(4), devices=TWO).placed
    lowered = _lower(f, np.ones(4), devices=TWO, soft_placement=True)
    assert lowered.placed.nodes[-1].device.endswith("cpu:0")
    assert any("soft placement" in note for note in lowered.placement_notes())


# -- partitioning ------------------------------------------------------------------------------
def test_every_cross_device_edge_has_one_send_and_one_recv_per_device():
    def f(x):
        with flowjit.device("cpu:0"):
            e = np.exp(x)
        with flowjit.device("cpu:1"):
            a, b = e * 2, -e
        with flowjit.device("cpu:2"):
            c = e + 1
        return a + b + c
    lowered = _lower(f, np.ones(4, np.float32), devices=["cpu:0", "cpu:1", "cpu:2"])
    parts = lowered.partitioned.partitions
    sends = [n for g in parts for n in g.nodes if n.op is ops.send]
    recvs = [n for g in parts for n in g.nodes if n.op is ops.recv]
    keys = sorted(n.attrs["key"] for n in recvs)
    assert sorted(n.attrs["key"] for n in sends) == keys
    assert len(keys) == len(set(keys))
    assert sum(1 for key in keys if key.endswith(";exp:0")) == 2     # cpu:1 once, cpu:2 once
    text = lowered.as_text("partitioned")
    assert flowjit.ir.parse_all(text) and "\n".join(flowjit.ir.print_graph(g) for g in flowjit.ir.parse_all(text)) == text


def test_recv_control_edges_never_make_a_cycle():
    def f(x, y):
        with flowjit.device("cpu:0"):
            s = np.exp(y).sum()
        with flowjit.device("cpu:1"):
            z = np.tanh(np.tanh(np.tanh(x)))
            return z * s
    x = np.random.default_rng(0).standard_normal(4096).astype(np.float32)
    y = np.ones(8, np.float32)
    jitted = flowjit.jit(f, devices=TWO)
    jitted.costs = CostModel(machine=STATIC)       # the schedule must not depend on this machine's load
    recv = next(n for g in jitted.lower(x, y).partitioned.partitions for n in g.nodes if n.op is ops.recv)
    assert recv.control_inputs                     # held back until shortly before its use
    reference = flowjit.jit(f, backend="interpreter")(x, y)
    _same(flowjit.jit(f, devices=TWO)(x, y), reference, (x, y))


def test_lossy_transfers_keep_the_upper_16_bits():
    def f(x):
        with flowjit.device("cpu:0"):
            e = x * 1.0 + 0.0
        with flowjit.device("cpu:1"):
            return e + 0.0
    x = np.array([1.0, np.pi, -1e-3, 3.4e38, np.inf, 1e-40], np.float32)
    got = flowjit.jit(f, devices=TWO, lossy_transfers=True)(x)
    want = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)
    np.testing.assert_array_equal(got, want)


# -- the executor ------------------------------------------------------------------------------------
@pytest.mark.parametrize("program", [pytest.param(p, id=p.name, marks=sampled(p.name, program_corpus_sample()))
                                     for p in PROGRAMS])
def test_corpus_on_two_devices(program):
    """The covering sample of the corpus (corpus_sample.py: every op on every combination of
    input dtypes the corpus uses) on two devices; the other programs under ``make test-slow``."""
    args = program.make_args(np.random.default_rng(1))
    reference = flowjit.jit(program.fun, static_argnums=program.static_argnums, backend="interpreter")(*args)
    for strategy in ("cost", "random"):
        jitted = flowjit.jit(program.fun, static_argnums=program.static_argnums, devices=TWO,
                             placement=strategy, placement_seed=3)
        _same(jitted(*args), reference, args)


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(program=random_programs(), devices=st.integers(2, 4), seed=st.integers(0, 2 ** 16))
def test_random_graphs_on_random_placements(program, devices, seed):
    args = program.make_args(np.random.default_rng(0))
    names = [f"cpu:{i}" for i in range(devices)]
    reference = flowjit.jit(program, backend="interpreter")(*args)
    got = flowjit.jit(program, devices=names, placement="random", placement_seed=seed)(*args)
    _same(got, reference, args)


def test_an_error_on_one_device_aborts_the_call_and_names_the_node():
    def f(x, i):
        with flowjit.device("cpu:1"):
            y = np.exp(x)
        return y + i
    lowered = _lower(f, np.ones(4, np.float32), np.ones(4, np.float32), devices=TWO)
    executable = lowered.multi_device_executable
    step = next(s for s in executable.steps if s.kind == "kernel" and s.node.op is not ops.constant
                and executable.devices[s.device].short == "cpu:1")

    def broken(*arrays):
        raise FloatingPointError("boom")
    step.run = broken
    with pytest.raises(ExecutionError, match=r"node %\w+ .* on cpu:1 failed \(traced at .*test_devices.py:\d+\)"
                                             r": FloatingPointError: boom"):
        executable(np.ones(4, np.float32), np.ones(4, np.float32))
    step.run = executable.kernels[(step.device, step.node.name)]
    executable(np.ones(4, np.float32), np.ones(4, np.float32))      # the executor is still usable


def test_described_devices_plan_but_do_not_run(monkeypatch):
    monkeypatch.setattr("flowjit.devices._gpu_runs_here", lambda index: False)       # a machine without a GPU
    monkeypatch.setattr("flowjit.gpu.device_count", lambda: 0)

    def f(a):
        return np.tanh(a @ a)
    x = np.ones((1024, 1024), np.float32)
    jitted = flowjit.jit(f, devices=["cpu:0", "gpu:0"])
    assert "device:gpu:0" in jitted.lower(x).as_text("placed")
    with pytest.raises(DeviceError, match="described for planning but cannot run here"):
        jitted(x)
    # a program placed on the GPU alone: the same error (not a compile failure), naming the op
    # and the user's line
    only_gpu = flowjit.jit(f, devices=["gpu:0"])
    with pytest.raises(DeviceError, match=r"test_devices.py:\d+: device gpu:0 .* cannot run here -- no GPU here"
                                          r".* the first %\w+: (matmul|tanh)\)"):
        only_gpu(x)


def test_profile_writes_a_chrome_trace(tmp_path):
    def f(x, y):
        with flowjit.device("cpu:1"):
            a = np.exp(x)
        with flowjit.device("cpu:0"):
            return a + y
    x = np.ones(16, np.float32)
    path = tmp_path / "trace.json"
    result, trace = flowjit.jit(f, devices=TWO).profile(x, x, path=str(path))
    np.testing.assert_allclose(result, np.exp(x) + x, rtol=1e-6)
    loaded = json.loads(path.read_text())
    events = loaded["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert any(t.startswith("cpu:0") for t in tracks) and any(t.startswith("cpu:1") for t in tracks)
    spans = [e for e in events if e["ph"] == "X"]
    assert {"kernel", "send", "recv"} <= {e["cat"] for e in spans}
    assert all(e["dur"] > 0 and e["ts"] >= 0 for e in spans)
    starts = [e for e in events if e["ph"] == "s"]
    ends = [e for e in events if e["ph"] == "f"]
    assert starts and {e["id"] for e in starts} == {e["id"] for e in ends}


def test_a_session_wide_device_set_applies_to_functions_without_their_own():
    def f(x):
        with flowjit.device("cpu:1"):
            return np.exp(x)
    try:
        flowjit.set_devices(TWO)
        assert [d.short for d in flowjit.current_devices()] == ["cpu:0", "cpu:1"]
        placed = flowjit.jit(f).lower(np.ones(4)).placed
        assert placed.nodes[-1].device == canonical("cpu:1")
        np.testing.assert_allclose(flowjit.jit(f)(np.ones(4)), np.exp(np.ones(4)))
    finally:
        flowjit.set_devices(None)
    assert [d.short for d in flowjit.current_devices()] == ["cpu:0"]


def test_a_real_gpus_figures_are_measured_once_and_shown(monkeypatch, tmp_path, capsys):
    """Where CuPy sees a GPU (posed here: CI has none), gpu:0's figures in the cost model are
    measured: bandwidth (its device-to-device copy), FLOP rate (a cuBLAS matmul) and launch
    cost, kept in the cache directory for the next process on the same GPU, driver and CuPy;
    `flowjit devices` names the GPU, its memory and the figures."""
    import flowjit.gpu as gpu
    from flowjit import gpu_figures
    from flowjit.cli import main
    measured = []
    known = {"name": "NVIDIA Posed 80GB", "memory": 80 * 2 ** 30, "multiprocessors": 132, "capability": "90",
             "driver": 12080, "cupy": "14.2.0"}
    monkeypatch.setenv("FLOWJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(gpu, "simulated", lambda: False)
    monkeypatch.setattr(gpu, "available", lambda: True)
    monkeypatch.setattr("flowjit.devices._gpu_runs_here", lambda index: True)
    monkeypatch.setattr(gpu_figures, "properties", lambda index: dict(known))
    monkeypatch.setattr(gpu_figures, "copy_bandwidth", lambda index: measured.append(index) or 2.5e12)
    monkeypatch.setattr(gpu_figures, "matmul_flops", lambda index: 4.2e13)
    monkeypatch.setattr(gpu_figures, "launch_cost", lambda index: 6.5e-6)
    gpu_figures.gpu_figures.cache_clear()
    try:
        made = Device.make("gpu:0")
        assert (made.bandwidth, made.flops, made.launch) == (2.5e12, 4.2e13, 6.5e-6) and measured == [0]
        assert Device.make("gpu:0", bandwidth=1e12).bandwidth == 1e12          # (a device's own figure wins)
        gpu_figures.gpu_figures.cache_clear()                                    # a new process: read back
        made = Device.make("gpu:0")
        assert (made.bandwidth, made.flops, made.launch) == (2.5e12, 4.2e13, 6.5e-6) and measured == [0]
        assert main(["devices", "--devices", "cpu:0,gpu:0"]) == 0
        out = capsys.readouterr().out
        assert "gpu:0: NVIDIA Posed 80GB, 80.0 GiB, 132 multiprocessors, compute capability 9.0; " \
               "device-to-device copy 2500 GB/s, float32 matmul 42.0 TFLOP/s, launch 6.5 µs (cached" in out
        row = next(line for line in out.splitlines() if "device:gpu:0" in line).split()
        assert row[3:6] == ["2500.0", "42000.0", "6.50"], row
        known["driver"] = 12090                                                  # another driver: measured again
        gpu_figures.gpu_figures.cache_clear()
        Device.make("gpu:0")
        assert measured == [0, 0]
        import json
        kept = tmp_path / "gpu-0.json"                                            # an older file: bandwidth only
        kept.write_text(json.dumps({key: value for key, value in json.loads(kept.read_text()).items()
                                    if key not in ("flops", "launch")}))
        gpu_figures.gpu_figures.cache_clear()
        assert Device.make("gpu:0").flops == 4.2e13 and measured == [0, 0, 0]
        monkeypatch.setattr(gpu, "simulated", lambda: True)                      # the simulator: no figures
        gpu_figures.gpu_figures.cache_clear()
        assert gpu_figures.gpu_figures(0, str(tmp_path)) is None
    finally:
        gpu_figures.gpu_figures.cache_clear()


def test_transfers_take_the_links_within_a_process_and_the_task_link_between_tasks():
    """A task's GPU and CPU share its process (the GPU's own link, PCIe); another task's devices
    are over the link between tasks, whichever device of the task sends."""
    from flowjit.compiler.ir.graph import Graph
    from flowjit.compiler.ir.types import TensorType
    from flowjit.runtime.cluster_spec import LINK_BANDWIDTH, LINK_LATENCY, task_devices
    value = Graph("g").add_input("x", TensorType((1000,), np.float32))
    cpu, gpu = task_devices("/job:worker/task:1", gpus=1)
    (other,) = task_devices("/job:worker/task:0")
    costs = CostModel(machine=STATIC)
    assert gpu.executable and gpu.type == "gpu"
    assert costs.transfer(value, cpu, gpu) == pytest.approx(10e-6 + 4000 / 10e9)      # (the slower link: the CPU's)
    for source in (cpu, gpu):
        assert costs.transfer(value, source, other) == pytest.approx(LINK_LATENCY + 4000 / LINK_BANDWIDTH)
        assert costs.transfer(value, other, source) == costs.transfer(value, source, other)
    local = [Device.make("cpu:0"), Device.make("cpu:1")]
    assert costs.transfer(value, *local) == pytest.approx(5e-6)            # (one memory: the latency alone)
    first, second = task_devices("/job:worker/task:1", cpu_devices=2)     # (so do a task's: one process)
    assert costs.transfer(value, first, second) == pytest.approx(5e-6)


def test_tasks_sharing_a_node_are_priced_by_its_link_whatever_their_measured_ones():
    """Two tasks on a node the first task does not share (their links measured over the
    network) reach each other over their node's local link; either reaches a task of another
    node over the slower of their links; a device whose node is unknown (a planned cluster) by
    its remote link, as before nodes were known."""
    from flowjit.compiler.ir.graph import Graph
    from flowjit.compiler.ir.types import TensorType
    from flowjit.runtime.cluster_spec import LINK_BANDWIDTH, LINK_LATENCY, task_devices
    value = Graph("g").add_input("x", TensorType((1000,), np.float32))
    network = (1e-3, 1e8)
    (home,) = task_devices("/job:ps/task:0", node="a")
    (one,), (two,) = (task_devices(f"/job:worker/task:{i}", link=network, node="b") for i in (0, 1))
    (elsewhere,) = task_devices("/job:worker/task:2", link=(2e-3, 5e7), node="c")
    (unknown,), (unknown_too,) = (task_devices(f"/job:worker/task:{i}", link=network) for i in (3, 4))
    costs = CostModel(machine=STATIC)
    assert costs.transfer(value, one, two) == pytest.approx(LINK_LATENCY + 4000 / LINK_BANDWIDTH)
    assert costs.transfer(value, home, one) == pytest.approx(1e-3 + 4000 / 1e8)
    assert costs.transfer(value, one, elsewhere) == pytest.approx(2e-3 + 4000 / 5e7)
    assert costs.transfer(value, unknown, unknown_too) == pytest.approx(1e-3 + 4000 / 1e8)
    assert one.link_to(two) == two.link_to(one) == (LINK_LATENCY, LINK_BANDWIDTH)


def test_a_library_op_on_a_gpu_costs_the_hosts_time_and_both_copies():
    """A GPU runs a library op (np.fft, sort, a gather) on its host, its operands copied across
    and back (CudaBackend.library_call): the cost model prices that, not the GPU's rates."""
    from flowjit.compiler.costmodel import moved_bytes
    graph = flowjit.jit(lambda x: np.fft.rfft(x, axis=1)).lower(np.ones((256, 256))).graph
    rfft = next(node for node in graph.nodes if node.op.name == "rfft")
    gpu = Device.make("gpu:0", executable=False, bandwidth=3e12, flops=5e13, launch=5e-6)
    cpu = Device.make("cpu:0")
    costs = CostModel(machine=STATIC)
    copies = 2 * gpu.link_latency + moved_bytes(rfft) / gpu.link_bandwidth
    assert costs.node(rfft, gpu) == pytest.approx(costs.node(rfft, cpu) + copies)
    assert costs.node(rfft, gpu) > costs.node(rfft, cpu)
