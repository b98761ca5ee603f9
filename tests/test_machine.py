"""This machine's CPU figures: measured once, cached, shown by `flowjit devices`, used by the cost model."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np

from flowjit.compiler.costmodel import CostModel, moved_bytes
from flowjit.compiler.ir import Graph, ops
from flowjit.compiler.ir.types import TensorType
from flowjit import machine
from flowjit.devices import Device, DeviceSet

ROOT = pathlib.Path(__file__).parent.parent


def devices_cli(cache_dir, *args):
    env = dict(os.environ, FLOWJIT_CACHE_DIR=str(cache_dir))
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "devices", *args], capture_output=True,
                            text=True, cwd=ROOT, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_devices_shows_measured_figures_and_caches_them(tmp_path):
    out = devices_cli(tmp_path, "--devices", "cpu:0,gpu:0")
    cached = json.loads((tmp_path / "machine.json").read_text())
    figures = cached["figures"]
    assert cached["fingerprint"] == machine.fingerprint()
    assert 1e8 < figures["bandwidth"] < 1e13 and 1e8 < figures["flops"] < 1e14 and 0 < figures["launch"] < 1e-3
    assert 0 < figures["seconds"] < 30
    cpu, gpu = out.splitlines()[1:3]
    assert cpu.split()[3:6] == [f"{figures['bandwidth'] / 1e9:.1f}*", f"{figures['flops'] / 1e9:.1f}*",
                                f"{figures['launch'] * 1e6:.2f}*"]
    assert gpu.split()[3:6] == ["2000.0", "50000.0", "8.00"]          # described, not measured
    assert f"cached in {tmp_path / 'machine.json'}" in out
    again = devices_cli(tmp_path)                                    # the second process reads the file
    assert f"read from {tmp_path / 'machine.json'}" in again
    assert json.loads((tmp_path / "machine.json").read_text()) == cached


def test_a_damaged_or_foreign_cache_is_measured_again(tmp_path):
    (tmp_path / "machine.json").write_text('{"fingerprint": {"host": "elsewhere"}, "figures": {}}')
    figures = machine._read(str(tmp_path))
    assert figures is None
    (tmp_path / "machine.json").write_text("{not json")
    assert machine._read(str(tmp_path)) is None
    machine._write(str(tmp_path), machine.MachineFigures(1e9, 2e9, 3e-6, 0.5, "now"))
    assert machine._read(str(tmp_path)) == machine.MachineFigures(1e9, 2e9, 3e-6, 0.5, "now", source="cached")
    assert [p.name for p in tmp_path.iterdir()] == ["machine.json"]        # no temporary left behind


def elementwise_node():
    graph = Graph("g")
    x = graph.add_input("x", TensorType((1024,), np.float32))
    node = graph.add_node(ops.exp, [x], {}, [TensorType((1024,), np.float32)])
    return node


def test_the_cost_model_uses_the_machine_figures_unless_a_device_sets_its_own():
    node = elementwise_node()
    slow = machine.MachineFigures(bandwidth=1e9, flops=1e9, launch=1e-3)
    cpu = Device.make("cpu:0")
    assert CostModel(machine=slow).node(node, cpu) == 1e-3 + max(moved_bytes(node) / 1e9, 10 * 1024 / 1e9)
    assert CostModel(machine=machine.STATIC).node(node, cpu) == 2e-6 + moved_bytes(node) / 20e9
    own = Device.make("cpu:1", bandwidth=5e9, flops=5e9, launch=1e-6)
    assert CostModel(machine=slow).node(node, own) == 1e-6 + max(moved_bytes(node) / 5e9, 10 * 1024 / 5e9)
    gpu = DeviceSet.parse("gpu:0")["gpu:0"]
    assert CostModel(machine=slow).node(node, gpu) == 8e-6 + max(moved_bytes(node) / 2000e9, 10 * 1024 / 50e12)


def test_the_default_cost_model_measures_this_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWJIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(machine, "_in_process", {})
    figures = machine.MachineFigures(7e9, 9e10, 4e-7, 0.1, "then")
    machine._write(str(tmp_path), figures)
    model = CostModel()
    assert model.figures(Device.make("cpu:0")) == (7e9, 9e10, 4e-7)
