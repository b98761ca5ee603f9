"""Pictures of a program: DOT with a cluster per device and per kernel, colours by op kind,
transfers dashed; svg/png through Graphviz when it is there, and a way to get it when not."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.export import KIND_COLOURS, TRANSFER_COLOUR, to_dot
from flowjit.compiler.ir.ops.base import OpKind

ROOT = pathlib.Path(__file__).parent.parent
DEVICES = str(ROOT / "examples" / "devices.py")
TWO_BRANCHES = [f"{DEVICES}:two_branches", "--arg", "f32[16,16]", "--arg", "f32[16,16]", "--devices", "cpu:0,cpu:1"]


def dump(*args, env=None, cwd=ROOT, check=True):
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "dump", *args], capture_output=True, text=True,
                            cwd=cwd, env=env, timeout=300)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def two_branches_lowered():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from devices import two_branches
    finally:
        sys.path.pop(0)
    x = np.ones((16, 16), np.float32)
    return flowjit.jit(two_branches, devices=["cpu:0", "cpu:1"]).lower(x, x)


def clusters(dot: str) -> list[str]:
    return re.findall(r'subgraph "cluster_[^"]*" \{\n\s*label="([^"]*)"', dot)


def test_partitioned_stage_draws_a_cluster_per_device_and_dashed_transfers():
    lowered = two_branches_lowered()
    dot = to_dot(lowered.stage_graphs("partitioned"))
    assert clusters(dot) == ["/job:localhost/task:0/device:cpu:0", "/job:localhost/task:0/device:cpu:1"]
    (transfer,) = [line for line in dot.splitlines() if "transfer" in line]
    assert re.fullmatch(r'\s*"p0/send_sum_1" -> "p1/recv_sum_1" \[style=dashed, .*', transfer), transfer
    assert f'"p1/matmul" [fillcolor="{KIND_COLOURS[OpKind.MATMUL]}"' in dot
    assert f'"p0/send_sum_1" [fillcolor="{TRANSFER_COLOUR}"' in dot
    assert subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True, text=True).returncode == 0 \
        if shutil.which("dot") else True


def test_fused_partitions_draw_a_cluster_per_kernel_inside_its_device():
    lowered = two_branches_lowered()
    graphs = lowered.stage_graphs("fused")
    dot = to_dot(graphs)
    kernels = [f"{node.name} ({node.attrs['plan'].kind})" for graph in graphs for node in graph.nodes
               if node.op is ops.fused]
    assert len(kernels) >= 3
    assert [label for label in clusters(dot) if not label.startswith("/job")] == kernels
    for graph in graphs:                       # every node a kernel runs is drawn inside it
        for node in graph.nodes:
            if node.op is ops.fused:
                for inner in node.attrs["body"].nodes:
                    assert f'"{node.name}/{inner.name}"' in dot.replace('"p0/', '"').replace('"p1/', '"')


@pytest.mark.parametrize("stage", ["partitioned", "kernels"])
def test_cli_draws_the_stages_it_refused(stage):
    out = dump(*TWO_BRANCHES, "--stage", stage, "--format", "dot").stdout
    assert out.startswith('digraph "two_branches') and "cluster_" in out and "transfer" in out


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed (apt-get install graphviz)")
@pytest.mark.parametrize("fmt, magic", [("svg", b"<svg"), ("png", b"\x89PNG")])
def test_svg_and_png_through_graphviz(tmp_path, fmt, magic):
    result = dump(*TWO_BRANCHES, "--stage", "kernels", "--format", fmt, cwd=tmp_path)
    path = tmp_path / f"two_branches-kernels.{fmt}"
    assert f"wrote {fmt} of stage 'kernels' to {path.name}" in result.stderr
    assert magic in path.read_bytes()[:400]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]            # nothing half-written beside it


def test_without_graphviz_it_says_how_to_get_it(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))                             # no dot on this PATH
    result = dump(*TWO_BRANCHES, "--format", "svg", "-o", str(tmp_path / "g.svg"), env=env, check=False)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "Graphviz's `dot`, which is not on PATH" in result.stderr and "apt-get install graphviz" in result.stderr
    assert not (tmp_path / "g.svg").exists()
