"""examples/digits.py: the whitepaper's Figure 1 model trained on scikit-learn's digits: a small
version reaches >= 95% test accuracy in seconds; killed (SIGKILL) and restarted from its
checkpoint it ends with the same accuracy and losses as an uninterrupted run; placed across
cpu:0 and cpu:1 (one layer per device) it gives the losses of one device."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import flowjit

pytest.importorskip("sklearn")

ROOT = os.path.dirname(os.path.dirname(__file__))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import digits  # noqa: E402

SMALL = dict(steps=300, hidden=(32,))


def test_a_small_version_trains_to_95_percent_in_seconds():
    began = time.perf_counter()
    result = digits.run(**SMALL, name="digits_small")
    assert result["accuracy"] >= 0.95, result["accuracy"]
    assert result["losses"][-1] < result["losses"][0] / 10
    assert time.perf_counter() - began < 120          # seconds once compiled; the compile under load


def _example(checkpoint_dir, pause):
    command = [sys.executable, os.path.join(ROOT, "examples", "digits.py"), "--steps", "200", "--hidden", "32",
               "--json", "--seconds-per-step", str(pause)]
    if checkpoint_dir is not None:
        command += ["--checkpoint-dir", str(checkpoint_dir), "--every-steps", "20"]
    environment = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finished(process) -> dict:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_killed_and_restarted_it_ends_with_the_accuracy_of_an_uninterrupted_run(tmp_path):
    whole = _finished(_example(None, 0.0))
    killed = _example(tmp_path, 0.05)
    deadline = time.monotonic() + 300
    while not any(entry.latest and entry.step >= 60 for entry in flowjit.Checkpoint.checkpoints(tmp_path)):
        assert killed.poll() is None, f"the run ended before it was killed: {killed.communicate()[1]}"
        assert time.monotonic() < deadline, "no checkpoint of step 60 within 300 s"
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    resumed = _finished(_example(tmp_path, 0.0))
    assert 60 <= resumed["start_step"] < 200 and resumed["step"] == whole["step"] == 200
    assert resumed["accuracy"] == whole["accuracy"] >= 0.95
    assert resumed["losses"] == whole["losses"][resumed["start_step"]:]


def test_one_layer_per_device_gives_the_losses_of_one_device():
    one = digits.run(steps=20, hidden=(32, 16), name="digits_one")
    two = digits.run(steps=20, hidden=(32, 16), devices=["cpu:0", "cpu:1"], name="digits_two")
    lowered = two["model"].step.lower(*digits.batches(*digits.load()[0], 64)(0))
    devices = {graph.attrs.get("device") for graph in lowered.partitioned.partitions}
    assert len(devices) == 2                                  # it really runs on both
    # float32 losses: the same kernels, partitioned; sums may run in another order (a few ulps)
    np.testing.assert_allclose(two["losses"], one["losses"], rtol=1e-6)
    assert two["accuracy"] == one["accuracy"]
