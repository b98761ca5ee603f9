"""A process killed while saving checkpoints never loses the last complete one and never leaves a
half-written one that restores: killed at random moments, and at every file-system call of a save."""

from __future__ import annotations

import os
import pathlib
import random
import selectors
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from checkpoint_helpers import KEEP, values
from flowjit.runtime import checkpoint_files
from flowjit.runtime.checkpoint import Checkpoint, read_checkpoint

HELPERS = pathlib.Path(__file__).with_name("checkpoint_helpers.py")
ROOT = pathlib.Path(__file__).parent.parent.parent


class Zygote:
    """The helper script run as a process that forks checkpoint writers on command."""

    def __init__(self, directory: pathlib.Path):
        environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen([sys.executable, str(HELPERS), str(directory)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, env=environment, cwd=ROOT)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)

    def _line(self, timeout: float) -> str:
        if not self.selector.select(timeout):
            raise AssertionError(f"the writer zygote said nothing for {timeout} s")
        line = self.process.stdout.readline()
        assert line, f"the writer zygote died (exit {self.process.poll()})"
        return line.strip()

    def start(self, command: str) -> int:
        """Fork a writer; its pid."""
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return int(self._line(timeout=60))        # the first one waits for flowjit's import

    def reaped(self) -> int:
        """Let the zygote reap the writer; its wait status."""
        self.process.stdin.write("reap\n")
        self.process.stdin.flush()
        word, status = self._line(timeout=30).split()
        assert word == "exit"
        return int(status)

    def close(self):
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process.stdout.close()


@pytest.fixture
def zygote(tmp_path):
    zygote = Zygote(tmp_path / "ckpt")
    yield zygote
    zygote.close()


def check_directory(directory: pathlib.Path) -> int | None:
    """Every checkpoint file restores with exactly the values of its step, and the directory's
    latest restores through Checkpoint; the latest step (None before the first completed save)."""
    for entry in checkpoint_files.entries(str(directory)):
        restored = read_checkpoint(entry.path)
        assert restored.step == entry.step
        assert_values(restored, entry.step)
    if Checkpoint.latest(directory) is None:
        assert not checkpoint_files.entries(str(directory)) or len(checkpoint_files.entries(str(directory))) == 1
        return None
    restored = Checkpoint(values(0)).restore(directory)
    assert_values(restored, restored.step)
    return restored.step


def assert_values(arrays, step):
    want = values(step)
    assert sorted(arrays) == sorted(want)
    for name, array in want.items():
        assert arrays[name].dtype == array.dtype and np.array_equal(arrays[name], array), (name, step)


def test_random_kills_never_lose_or_corrupt_a_checkpoint(zygote, tmp_path):
    directory = tmp_path / "ckpt"
    durations = []                                # kills spread over a few saves, however fast the disk
    for step in range(4):
        started = time.monotonic()
        Checkpoint(values(step)).save(tmp_path / "scratch", step)
        durations.append(time.monotonic() - started)
    window = max(6 * sorted(durations[1:])[1], 0.03)
    started = time.monotonic()
    chooser = random.Random(16)
    latest, saw_temporaries, saw_partial, previous_temporaries = None, 0, 0, []
    kills = 60
    for kill in range(kills):
        pid = zygote.start("loop")
        time.sleep(chooser.uniform(0.0, window))
        os.kill(pid, signal.SIGKILL)
        status = zygote.reaped()
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, \
            f"kill {kill}: the writer ended by itself (wait status {status}) before it was killed"
        step = check_directory(directory)
        if latest is not None:
            assert step is not None and step >= latest, f"kill {kill}: step {latest} was lost (now {step})"
            if step > latest:            # this writer completed a save: it removed what dead ones left
                assert not set(previous_temporaries) & set(checkpoint_files.temporaries(str(directory)))
        latest = step
        previous_temporaries = checkpoint_files.temporaries(str(directory))
        saw_temporaries += bool(previous_temporaries)
        full = max((entry.size for entry in checkpoint_files.entries(str(directory))), default=0)
        saw_partial += any(os.path.getsize(directory / name) < full for name in previous_temporaries
                           if name.startswith(".tmp-ckpt"))
    elapsed = time.monotonic() - started
    print(f"{kills} kills in {elapsed:.1f} s (each within {window * 1e3:.0f} ms): reached step {latest}, a temporary was left {saw_temporaries} "
          f"times ({saw_partial} of them partly written)")
    assert latest is not None and latest >= 5, "the writers hardly ever completed a save"
    assert saw_temporaries, "no kill landed inside a save"
    # A clean save removes every temporary and keeps exactly KEEP checkpoints.
    Checkpoint(values(latest + 1), keep=KEEP).save(directory, latest + 1)
    assert checkpoint_files.temporaries(str(directory)) == []
    assert [entry.step for entry in Checkpoint.checkpoints(directory)] == [latest - 1, latest, latest + 1]
    assert check_directory(directory) == latest + 1


def test_a_kill_at_every_file_system_call_of_a_save(zygote, tmp_path):
    directory = tmp_path / "ckpt"
    for step in range(KEEP + 1):                        # a full directory, so the save also prunes
        Checkpoint(values(step), keep=KEEP).save(directory, step)
    latest = KEEP
    call = 1
    outcomes = []
    while True:
        zygote.start(f"crash {call}")
        status = zygote.reaped()
        step = check_directory(directory)
        if os.WIFEXITED(status):                         # the save needed fewer calls: it completed
            assert os.WEXITSTATUS(status) == 0
            assert step == latest + 1 and checkpoint_files.temporaries(str(directory)) == []
            break
        assert os.WTERMSIG(status) == signal.SIGKILL
        assert step in (latest, latest + 1), (call, step)
        outcomes.append(step - latest)
        latest = step
        call += 1
        assert call < 100
    # Early kills leave the previous step the latest; once the pointer is renamed, the new one is.
    assert outcomes[0] == 0 and 1 in outcomes, outcomes
    assert len(outcomes) >= 8, outcomes
