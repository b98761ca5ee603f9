"""The flowjit command line, run as a user runs it."""

import json
import pathlib
import subprocess
import sys

import pytest

from flowjit.compiler import ir

ROOT = pathlib.Path(__file__).parent.parent
MODELS = ROOT / "examples" / "models.py"


def flowjit(*args, check=True):
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", *args], capture_output=True, text=True,
                            cwd=ROOT)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def test_help_explains_every_flag():
    top = flowjit("--help").stdout
    assert "dump" in top
    dump = flowjit("dump", "--help").stdout
    for flag in ("--arg", "--static", "--stage", "--format", "--output"):
        assert flag in dump
    assert "FILE.py:FUNC names a function in a Python file" in top


def test_every_argument_of_every_command_has_help():
    """FILE.py:FUNC and profile's --static included (they had none)."""
    import argparse
    from flowjit.cli import build_parser
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name, parser in commands.choices.items():
        for action in parser._actions:
            if name != "bench" and not isinstance(action, argparse._HelpAction):
                assert action.help and len(action.help) > 20, (name, action.dest)
    for command in ("dump", "profile"):
        assert "FILE.py:FUNC names a function in a Python file" in flowjit(command, "--help").stdout


def test_dump_text_parses_back():
    out = flowjit("dump", f"{MODELS}:softmax", "--arg", "x=f32[4,8]").stdout
    graph = ir.parse(out)
    ir.verify(graph)
    assert ir.print_graph(graph) == out
    assert [node.op.name for node in graph.nodes] == ["max", "sub", "exp", "sum", "div"]
    assert 'loc("examples/models.py":8)' in out


def test_dump_positional_and_static_arguments():
    out = flowjit("dump", f"{MODELS}:black_scholes", "--arg", "f64[16]", "--arg", "X=f64[16]", "--arg",
                  "T=f64[16]", "--static", "r=0.05").stdout
    assert out.startswith("graph @black_scholes(%S: f64[16], %X: f64[16], %T: f64[16]) -> (f64[16])")


def test_dump_formats_and_output_file(tmp_path):
    dot = flowjit("dump", f"{MODELS}:mlp", "--arg", "x=f32[2,4]", "--arg", "w1=f32[4,8]", "--arg", "b1=f32[8]",
                  "--arg", "w2=f32[8,3]", "--arg", "b2=f32[3]", "--format", "dot").stdout
    assert dot.startswith('digraph "mlp (traced)" {') and '"matmul" -> "add"' in dot
    path = tmp_path / "g.json"
    result = flowjit("dump", f"{MODELS}:softmax", "--arg", "x=f32[4,8]", "--format", "json", "-o", str(path))
    assert "wrote json" in result.stderr
    data = json.loads(path.read_text())
    assert [node["op"] for node in data["nodes"]] == ["max", "sub", "exp", "sum", "div"]


@pytest.mark.parametrize("args, message", [
    (["nofile.py:f"], "no such file: nofile.py"),
    ([f"{MODELS}:nothing"], "has no function 'nothing'"),
    ([f"{MODELS}:softmax", "--arg", "x=f32[4,8"], "is not a type such as f32[64,784]"),
    ([f"{MODELS}:softmax", "--arg", "x=q64[4]"], "unknown dtype 'q64'"),
    ([f"{MODELS}:mlp", "--arg", "x=f32[4]"], "mlp(x, w1, b1, w2, b2): missing a required argument: 'w1'"),
    ([f"{MODELS}:softmax", "--arg", "x=f32[4,8]", "--stage", "nope"], "unknown stage 'nope'"),
])
def test_dump_errors_are_clear(args, message):
    result = flowjit("dump", *args, check=False)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr


DEVICES = ROOT / "examples" / "devices.py"
TWO_BRANCHES = [f"{DEVICES}:two_branches", "--arg", "f32[16,16]", "--arg", "f32[16,16]"]


def test_devices_lists_the_set_with_described_gpus():
    out = flowjit("devices", "--devices", "cpu:0,cpu:1x2,gpu:0").stdout.splitlines()
    assert out[1].startswith("/job:localhost/task:0/device:cpu:0") and out[1].endswith("yes")
    assert out[2].split()[2] == "2"                               # cpu:1 has two threads
    # (the tests set NUMBA_ENABLE_CUDASIM=1: with numba-cuda installed, gpu:0 runs on its simulator)
    import flowjit.gpu as gpu
    assert out[3].startswith("/job:localhost/task:0/device:gpu:0")
    assert out[3].endswith("simulated" if gpu.installed() and gpu.available() else "no")
    assert "device:cpu:0" in flowjit("devices").stdout           # the session default


def test_dump_placed_and_partitioned_stages():
    placed = flowjit("dump", *TWO_BRANCHES, "--devices", "cpu:0,cpu:1", "--stage", "placed").stdout
    graph = ir.parse(placed)
    assert {node.device for node in graph.nodes} <= {"/job:localhost/task:0/device:cpu:0",
                                                     "/job:localhost/task:0/device:cpu:1"}
    parts = flowjit("dump", *TWO_BRANCHES, "--devices", "cpu:0,cpu:1", "--stage", "partitioned").stdout
    graphs = ir.parse_all(parts)
    assert len(graphs) == 2 and ir.print_graphs(graphs) == parts
    assert any(node.op.name == "send" for node in graphs[0].nodes)
    assert any(node.op.name == "recv" for node in graphs[1].nodes)
    soft = flowjit("dump", *TWO_BRANCHES, "--devices", "cpu:0", "--stage", "placed", "--soft-placement").stdout
    assert soft.startswith("# soft placement: %matmul (matmul) requests /device:cpu:1")
    failed = flowjit("dump", *TWO_BRANCHES, "--devices", "cpu:0", "--stage", "placed", check=False)
    assert failed.returncode == 1 and "turn on soft placement" in failed.stderr


def test_profile_writes_chrome_trace(tmp_path):
    path = tmp_path / "trace.json"
    out = flowjit("profile", *TWO_BRANCHES, "--devices", "cpu:0,cpu:1", "-o", str(path)).stdout
    # 5 kernels and transfers, and the 2 reshape views collapse-reductions puts before the
    # two whole-array sums (each reads its 16x16 input as one row of 256)
    assert f"wrote {path}: 7 spans, 1 transfers" in out
    events = json.loads(path.read_text())["traceEvents"]
    assert sum(1 for event in events if event["ph"] == "X") == 7


def test_the_demo_runs_every_stage_and_matches_numpy():
    """`make demo`'s first half: every stage prints (partitioned included) and the result
    matches numpy; it broke once when the partitioned stage arrived."""
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "demo.py")], cwd=ROOT, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    stages = [line for line in result.stdout.splitlines() if line.startswith("== stage")]
    assert [line.split("'")[1] for line in stages] == ["traced", "optimized", "placed", "partitioned", "fused",
                                                       "kernels"]
    assert "matches numpy: True" in result.stdout
