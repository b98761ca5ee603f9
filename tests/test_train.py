"""flowjit.train.loop: checkpoints of the step's and the optimiser's variables, the step and the
data position; a run killed mid-way (SIGKILL) and restarted ends as an uninterrupted one; the
progress line on a terminal only."""

import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import flowjit
from flowjit import optim, train
from flowjit.errors import ArgumentError

HERE = os.path.dirname(__file__)
SCRIPT = os.path.join(HERE, "train_scripts", "resumable.py")


def _run(checkpoint_dir, out, pause, **kwargs):
    environment = {**os.environ, "PYTHONPATH": os.path.dirname(HERE) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, SCRIPT, str(checkpoint_dir), str(out), str(pause)], env=environment,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def test_a_run_killed_mid_way_and_restarted_ends_as_an_uninterrupted_one(tmp_path):
    whole = _run(tmp_path / "whole", tmp_path / "whole.npz", 0.0)
    assert whole.wait(timeout=300) == 0, whole.stderr.read().decode()
    killed = _run(tmp_path / "ckpt", tmp_path / "killed.npz", 0.1)
    deadline = time.monotonic() + 300
    while True:
        entries = flowjit.Checkpoint.checkpoints(tmp_path / "ckpt") if (tmp_path / "ckpt").exists() else []
        if any(entry.latest and entry.step >= 8 for entry in entries):
            break
        assert killed.poll() is None, f"the run ended before it was killed: {killed.stderr.read().decode()}"
        assert time.monotonic() < deadline, "no checkpoint of step 8 within 300 s"
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=60) == -signal.SIGKILL
    assert not (tmp_path / "killed.npz").exists()
    restarted = _run(tmp_path / "ckpt", tmp_path / "restarted.npz", 0.0)
    assert restarted.wait(timeout=300) == 0, restarted.stderr.read().decode()
    want, got = np.load(tmp_path / "whole.npz"), np.load(tmp_path / "restarted.npz")
    assert want["start"] == 0 and 8 <= got["start"] < 40 and got["step"] == want["step"] == 40
    assert got["count"] == want["count"] == 40                  # the optimiser's step count came back too
    np.testing.assert_array_equal(got["w"], want["w"])          # bit for bit: each step is deterministic
    np.testing.assert_array_equal(got["b"], want["b"])
    np.testing.assert_array_equal(got["losses"], want["losses"][int(got["start"]):])
    assert [entry.step for entry in flowjit.Checkpoint.checkpoints(tmp_path / "ckpt")][-1] == 40


def _model(prefix):
    rng = np.random.default_rng(1)
    params = [flowjit.Variable(rng.standard_normal((4, 2)), name=f"{prefix}_w"),
              flowjit.Variable(np.zeros(2), name=f"{prefix}_b")]
    optimizer = optim.SGD(0.1, momentum=0.5)

    @flowjit.jit
    def step(x, y):
        return optimizer.minimize(lambda p, x, y: np.mean((x @ p[0] + p[1] - y) ** 2), params, x, y)
    return params, optimizer, step


def _batches(count):
    rng = np.random.default_rng(2)
    return [(rng.standard_normal((8, 4)), rng.standard_normal((8, 2))) for _ in range(count)]


def test_checkpoints_hold_the_step_and_optimiser_variables_and_the_data_position(tmp_path):
    params, optimizer, step = _model("loop_a")
    data = _batches(3)                                           # a sequence: epochs repeat
    result = train.loop(step, data, steps=7, checkpoint_dir=tmp_path, every_steps=2, keep=2)
    assert (result.start_step, result.step, len(result.losses)) == (0, 7, 7)
    assert [entry.step for entry in flowjit.Checkpoint.checkpoints(tmp_path)] == [6, 7]    # keep=2
    from flowjit.runtime.checkpoint import read_checkpoint
    saved = read_checkpoint(tmp_path)
    assert saved.step == 7 and int(saved[train.POSITION]) == 7
    names = {variable.name for variable in params + optimizer.variables()}
    assert names <= set(saved) and any(name.endswith("/momentum") for name in saved)
    np.testing.assert_array_equal(saved["loop_a_w"], params[0].numpy())
    # A second loop over the same directory resumes at 7 and runs to 10, as one of 10 steps would.
    again = train.loop(step, data, steps=10, checkpoint_dir=tmp_path, every_steps=2)
    assert (again.start_step, again.step, again.restored_from is not None) == (7, 10, True)
    other, other_optimizer, other_step = _model("loop_b")
    whole = train.loop(other_step, data, steps=10)
    np.testing.assert_array_equal(other[0].numpy(), params[0].numpy())
    np.testing.assert_array_equal(np.array(whole.losses[7:]), np.array(again.losses))
    done = train.loop(step, data, steps=10, checkpoint_dir=tmp_path)             # nothing left to run
    assert (done.start_step, done.step, done.losses, done.saved) == (10, 10, [], [])


def test_an_iterable_is_skipped_to_its_position_and_every_seconds_saves(tmp_path):
    params, optimizer, step = _model("loop_c")
    data = _batches(6)
    train.loop(step, iter(data), steps=3, checkpoint_dir=tmp_path, every_seconds=1e-9)
    assert [entry.step for entry in flowjit.Checkpoint.checkpoints(tmp_path)] == [1, 2, 3]
    resumed = train.loop(step, (batch for batch in data), steps=6, checkpoint_dir=tmp_path)
    other, _, other_step = _model("loop_d")
    whole = train.loop(other_step, data, steps=6)
    np.testing.assert_array_equal(other[0].numpy(), params[0].numpy())
    assert resumed.losses == whole.losses[3:]
    with pytest.raises(ArgumentError, match=r"the data ran out after 6 batches"):
        train.loop(step, iter(data), steps=7)


def test_the_progress_line_shows_on_a_terminal_only(monkeypatch):
    _, _, step = _model("loop_e")

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.delenv("CI", raising=False)
    train.loop(step, _batches(2), steps=3)
    shown = terminal.getvalue()
    assert "3/3" in shown and "steps/s" in shown and "loss" in shown and shown.endswith("\n")
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    train.loop(step, _batches(2), steps=3)
    assert piped.getvalue() == ""


def test_errors():
    _, _, step = _model("loop_f")
    with pytest.raises(ArgumentError, match=r"steps=-1"):
        train.loop(step, _batches(1), steps=-1)
    with pytest.raises(ArgumentError, match=r"every_steps/every_seconds need a checkpoint_dir"):
        train.loop(step, _batches(1), steps=1, every_steps=1)
    with pytest.raises(ArgumentError, match=r"must return its loss"):
        train.loop(lambda x, y: "nope", _batches(1), steps=1)
    with pytest.raises(ArgumentError, match=r"name the variables to save"):
        train.loop(lambda x, y: 0.0, _batches(1), steps=1, checkpoint_dir="unused")
