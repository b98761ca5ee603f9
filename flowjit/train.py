"""``flowjit.train.loop``: run a compiled training step over data, checkpointing as it goes, and
continue from the latest checkpoint after a restart (the whitepaper's §3.3 fault tolerance).

::

    result = flowjit.train.loop(train_step, batches, steps=1000, checkpoint_dir="ckpt",
                                every_steps=100, every_seconds=60)

Each step takes the next batch of ``data`` and calls ``step_fn`` with it (a tuple is spread
over the positional arguments, a dict over the keywords); ``step_fn`` returns the loss, or a
tuple whose first item is the loss.  ``data`` is one of

- a sequence (``len`` and indexing): batch ``i`` is ``data[i % len(data)]`` (epochs repeat);
- a callable: batch ``i`` is ``data(i)``;
- any other iterable: batches in order; after a restart the first ``position`` are read and
  dropped.

A checkpoint (``Checkpoint``, written atomically, ``keep`` kept) holds the variables of the
step (every variable its trace reads or writes, which includes an optimiser's slots, step
count and learning rate) or those given as ``variables=``, plus the loop's step (the
checkpoint's step) and data position.  It is written when ``CheckpointPolicy(every_steps,
every_seconds)`` says so and after the last step.  On start, the latest checkpoint of
``checkpoint_dir`` is restored (nothing when there is none), and the loop continues from its
step: a run killed at any moment and started again ends with the same variables as one that
was never interrupted, since each step is deterministic.

A step placed on a cluster (``jit(step, devices=cluster)``) recovers from a lost task: when a
step (or a save) fails because a task died, hung or lost its variables, the loop restarts
the lost tasks, restores every variable from the latest checkpoint (so that the tasks that
survived drop what the failed step half did), and continues from its step; the programs
register with the new processes on their next step.  So that there always is a checkpoint,
such a loop saves one before its first step.  At most ``recoveries`` times in a run.

On a terminal (stderr is a TTY) a progress line shows the step, steps/s and the loss; piped,
the loop prints nothing (``progress=True/False`` overrides).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from flowjit.errors import ArgumentError, CheckpointError, user_location
from flowjit.frontend.tracer import is_variable
from flowjit.progress import bar, on_terminal
from flowjit.runtime.checkpoint import Checkpoint, CheckpointPolicy

__all__ = ["loop", "TrainResult"]

POSITION = "train/data_position"       # the checkpoint entry of the data position


@dataclass
class TrainResult:
    """What a ``loop`` call did: the step it started at (0, or the restored checkpoint's), the
    step it ended at, each step's loss (of the steps this call ran), and the checkpoint it
    restored (its path) or None."""

    start_step: int
    step: int
    losses: list[float] = field(default_factory=list)
    restored_from: str | None = None
    saved: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)    # each recovery from a lost task, in words

    @property
    def loss(self) -> float | None:
        return self.losses[-1] if self.losses else None


def loop(step_fn: Callable, data, steps: int, checkpoint_dir=None, every_steps: int | None = None,
         every_seconds: float | None = None, keep: int | None = 5, variables=None,
         progress: bool | None = None, recoveries: int = 10) -> TrainResult:
    """Run ``step_fn`` for ``steps`` steps in all (counting the steps of the checkpoint it
    resumes from).  See the module docstring."""
    location = user_location()
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 0:
        raise ArgumentError(f"train.loop(steps={steps!r}): the number of steps is an integer >= 0", location)
    if checkpoint_dir is None and (every_steps is not None or every_seconds is not None):
        raise ArgumentError("train.loop: every_steps/every_seconds need a checkpoint_dir to save into", location)
    source = _Batches(data, location)
    checkpoint, policy, state = None, None, {}
    start, restored_from = 0, None
    if checkpoint_dir is not None:
        found = _variables_of(step_fn, source.peek(), variables, location)
        state = {variable.name: variable for variable in found}
        state[POSITION] = np.zeros((), np.int64)
        checkpoint = Checkpoint(state, keep=keep)
        restored = checkpoint.restore_latest(checkpoint_dir)
        if restored is not None:
            start, restored_from = restored.step, restored.path
            source.seek(int(restored[POSITION]))
        if every_steps is not None or every_seconds is not None:
            policy = CheckpointPolicy(every_steps, every_seconds, last_step=start)
    result = TrainResult(start, start, restored_from=restored_from)
    meter = _Progress(steps, start, progress)

    saved_step = start

    def save(step: int) -> None:
        nonlocal saved_step
        state[POSITION] = np.asarray(source.position, np.int64)
        result.saved.append(checkpoint.save(checkpoint_dir, step))
        saved_step = step
        if policy is not None:
            policy.saved(step)

    def recover(error) -> int:
        """(hosts) Restart the lost tasks, restore the latest checkpoint: the step to go on from."""
        nonlocal saved_step
        from flowjit.runtime.cluster_recovery import recover_from
        restored, what = recover_from(error, checkpoint, checkpoint_dir, recoveries - len(result.recovered))
        result.recovered.append(what)
        source.seek(int(restored[POSITION]))
        del result.losses[restored.step - start:]
        saved_step = restored.step
        if policy is not None:
            policy.saved(restored.step)
        return restored.step

    step = start
    try:
        if checkpoint is not None and restored_from is None and _on_cluster(step_fn):
            save(start)                                  # (hosts) a checkpoint to recover to
        while step < steps:
            try:
                loss = _loss_of(_call(step_fn, source.next()), location)
                step += 1
                result.step = step
                result.losses.append(loss)
                meter.update(step, loss)
                if policy is not None and step < steps and policy.due(step):
                    save(step)
            except _cluster_errors() as error:           # (hosts) a task lost mid-run
                step = result.step = recover(error)
        if checkpoint is not None and step != saved_step:
            save(step)
    finally:
        meter.close()
    return result


class _Batches:
    """The batches of ``data`` by position (see the module docstring)."""

    def __init__(self, data, location):
        self.position = 0
        self.location = location
        if isinstance(data, Sequence) or (hasattr(data, "__len__") and hasattr(data, "__getitem__")
                                          and not isinstance(data, Mapping)):
            if len(data) == 0:
                raise ArgumentError("train.loop: data is empty", location)
            self.kind, self.data = "sequence", data
        elif callable(data):
            self.kind, self.data = "callable", data
        elif isinstance(data, Iterable):
            self.kind, self.data, self.iterator, self.pending = "iterable", data, iter(data), []
        else:
            raise ArgumentError(f"train.loop: data must be a sequence of batches, a callable position -> batch, "
                                f"or an iterable of batches, not {type(data).__name__}", location)

    def at(self, position: int):
        if self.kind == "sequence":
            return self.data[position % len(self.data)]
        return self.data(position)

    def peek(self):
        if self.kind != "iterable":
            return self.at(self.position)
        if not self.pending:
            self.pending.append(self._pull())
        return self.pending[0]

    def next(self):
        batch = self.pending.pop(0) if self.kind == "iterable" and self.pending else \
            (self._pull() if self.kind == "iterable" else self.at(self.position))
        self.position += 1
        return batch

    def seek(self, position: int) -> None:
        """Continue at ``position`` (an iterable's batches up to there are read and dropped)."""
        if self.kind == "iterable":
            skip = position - self.position
            while skip > 0 and self.pending:
                self.pending.pop(0)
                skip -= 1
            for _ in range(skip):
                self._pull()
        self.position = position

    def _pull(self):
        try:
            return next(self.iterator)
        except StopIteration:
            raise ArgumentError(f"train.loop: the data ran out after {self.position} batches (give a sequence, "
                                f"which repeats, or fewer steps)", self.location) from None


def _on_cluster(step_fn) -> bool:
    devices = getattr(getattr(step_fn, "options", None), "devices", None)
    return getattr(devices, "cluster", None) is not None


def _cluster_errors():
    """The errors of a lost task (none when Ray's extra is not installed: no cluster runs)."""
    from flowjit.runtime.cluster import ClusterError
    return ClusterError


def _call(step_fn, batch):
    if isinstance(batch, tuple):
        return step_fn(*batch)
    if isinstance(batch, Mapping):
        return step_fn(**batch)
    return step_fn(batch)


def _loss_of(result, location) -> float:
    loss = result[0] if isinstance(result, (tuple, list)) and result else result
    if isinstance(loss, Mapping):
        loss = loss.get("loss")
    try:
        return float(np.asarray(loss))
    except (TypeError, ValueError):
        raise ArgumentError(f"train.loop: the step must return its loss (a scalar), or a tuple whose first "
                            f"item is the loss; it returned {type(result).__name__}", location) from None


def _variables_of(step_fn, batch, given, location) -> list:
    """The variables a checkpoint holds: ``given``, or every variable the step's trace uses."""
    if given is not None:
        found = list(given.values()) if isinstance(given, Mapping) else list(given)
        for item in found:
            if not is_variable(item):
                raise ArgumentError(f"train.loop(variables=...): {type(item).__name__} is not a flowjit.Variable",
                                    location)
        return found
    from flowjit.frontend.jit import Jitted
    if not isinstance(step_fn, Jitted):
        raise ArgumentError("train.loop: to checkpoint a step that is not a flowjit.jit function, name the "
                            "variables to save (variables=[...])", location)
    if isinstance(batch, tuple):
        program = step_fn.trace(*batch)
    elif isinstance(batch, Mapping):
        program = step_fn.trace(**batch)
    else:
        program = step_fn.trace(batch)
    if not program.variables:
        raise CheckpointError(f"train.loop: {step_fn!r} uses no variables, so a checkpoint would hold nothing "
                              f"(train variables, e.g. with flowjit.optim)")
    return [program.variables[name] for name in sorted(program.variables)]


class _Progress:
    """A progress line on a terminal: step, steps/s, loss; refreshed at most ten times a second."""

    def __init__(self, steps: int, start: int, enabled: bool | None, stream=None):
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = on_terminal(self.stream) and not os.environ.get("CI")
        self.enabled, self.steps, self.start = enabled, steps, start
        self.began = self.last = time.monotonic()
        self.shown = False

    def update(self, step: int, loss: float) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.last < 0.1 and step < self.steps:
            return
        self.last = now
        rate = (step - self.start) / max(now - self.began, 1e-9)
        self.stream.write(f"\r{bar(step, self.steps)} {step}/{self.steps}  {rate:8.1f} steps/s  loss {loss:.4g}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        if self.enabled and self.shown:
            self.stream.write("\n")
            self.stream.flush()
