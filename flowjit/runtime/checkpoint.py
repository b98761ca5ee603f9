"""Checkpoints (whitepaper §3.3): variables saved to disk every so often and restored after a
restart, never half-written.

``Checkpoint(variables, keep=5)`` saves and restores one set of variables, given as

- a mapping name -> numpy array (read at each save: rebinding an entry is seen),
- a mapping name -> variable, or
- a list of variables, keyed by their ``.name``,

where a variable is anything with ``.name``, ``.shape``, ``.dtype``, ``.numpy()`` (a copy of
its value) and ``.assign(array)`` (which copies ``array`` into it): ``flowjit.Variable`` is one.

The file format is in ``checkpoint_format`` (safetensors with a checksummed record), the
directory's crash-safe layout in ``checkpoint_files``. ``CheckpointPolicy`` says when a
training loop should save.
"""

from __future__ import annotations

import operator
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from flowjit.errors import CheckpointError
from flowjit.runtime import checkpoint_files as files
from flowjit.runtime.variables import VariableGuard, read_values, storage_of, write_values
from flowjit.runtime.checkpoint_files import CheckpointEntry
from flowjit.runtime.checkpoint_format import decode, encode, little_endian, read_header

__all__ = ["Checkpoint", "CheckpointPolicy", "Restored", "CheckpointEntry", "read_checkpoint", "read_header"]


def is_variable(value) -> bool:
    """Whether ``value`` follows the variable protocol (rather than being an array)."""
    return all(hasattr(value, attribute) for attribute in ("shape", "dtype", "numpy", "assign"))


class Restored(dict):
    """The arrays a restore read (name -> array), with the checkpoint's ``step`` and ``path``."""

    def __init__(self, arrays: Mapping[str, np.ndarray], step: int, path: str):
        super().__init__(arrays)
        self.step = step
        self.path = path

    def __repr__(self) -> str:
        return f"Restored(step={self.step}, path={self.path!r}, variables={sorted(self)})"


def read_checkpoint(path) -> Restored:
    """Every array of a checkpoint file (or a directory's latest), verified, with its step."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        header, arrays = decode(path, files.read_file(path))
        return Restored(arrays, header.step, path)
    directory = path
    path, data = files.read_latest(directory)
    try:
        header, arrays = decode(path, data)
    except CheckpointError as error:            # no silent fallback to an older one, but say which exist
        older = [os.path.basename(entry.path) for entry in files.entries(directory) if entry.path != path]
        if not older:
            raise
        raise CheckpointError(f"{error.message}\n(the latest checkpoint of {directory}; its others, which a "
                              f"restore by path reads: {', '.join(older)})", error.path, error.variable) from None
    return Restored(arrays, header.step, path)


def _buffers(slots: Mapping) -> dict:
    """name -> buffer of the flowjit.Variables among ``slots``."""
    buffers = (storage_of(value) for value in slots.values())
    return {buffer.name: buffer for buffer in buffers if buffer is not None}


def _current(value, held: dict):
    """A copy of a variable's value (``held``: the values of the flowjit.Variables, read under
    their locks), or the array itself."""
    buffer = storage_of(value)
    if buffer is not None:
        return held[buffer.name]
    return value.numpy() if is_variable(value) else value


class Checkpoint:
    """Saves ``variables`` into a directory of checkpoints and restores them from it.

    ``save(directory, step)`` writes ``directory/ckpt-<step>.safetensors`` atomically, points
    ``directory/latest`` at it, then keeps only the ``keep`` checkpoints of the highest steps
    (``keep=None`` keeps all). ``restore(path)`` restores a checkpoint file, or a directory's
    latest, checking everything before assigning anything.
    """

    def __init__(self, variables, keep: int | None = 5, lock_timeout: float = 60.0):
        if keep is not None and (not isinstance(keep, int) or keep < 1):
            raise CheckpointError(f"Checkpoint(keep={keep!r}): keep is the number of checkpoints to keep, at "
                                  f"least 1 (or None for all)")
        self.keep = keep
        self.lock_timeout = lock_timeout
        if isinstance(variables, Mapping):
            self._variables = variables          # read at each save and restore: rebinding is seen
        elif isinstance(variables, (list, tuple)):
            self._variables = self._by_name(variables)
        else:
            raise CheckpointError(f"Checkpoint(variables): expected a mapping name -> array or variable, or a "
                                  f"list of variables, not {type(variables).__name__}")
        self._slots()                            # check now what can be checked now

    @staticmethod
    def _by_name(variables) -> dict:
        by_name = {}
        for index, variable in enumerate(variables):
            if not is_variable(variable) or not isinstance(getattr(variable, "name", None), str):
                raise CheckpointError(f"Checkpoint(variables): item {index} ({type(variable).__name__}) is not a "
                                      f"variable with a name (a list must hold variables; name arrays with a dict)")
            if variable.name in by_name:
                raise CheckpointError(f"Checkpoint(variables): two variables are named '{variable.name}'",
                                      variable=variable.name)
            by_name[variable.name] = variable
        return by_name

    def _slots(self) -> dict:
        """name -> variable or array, each checked to be one of them, with a usable name."""
        slots = {}
        for name, value in self._variables.items():
            if not isinstance(name, str) or not name or name == "__metadata__":
                raise CheckpointError(f"Checkpoint(variables): {name!r} cannot name a variable in a checkpoint "
                                      f"(names are non-empty strings other than '__metadata__')", variable=str(name))
            if not is_variable(value) and not isinstance(value, (np.ndarray, np.generic)):
                raise CheckpointError(f"Checkpoint(variables): '{name}' is a {type(value).__name__}, neither a "
                                      f"numpy array nor a variable", variable=name)
            slots[name] = value
        return slots

    @property
    def names(self) -> list[str]:
        return sorted(self._slots())

    def save(self, directory, step: int) -> str:
        """Write the variables' values as the checkpoint of ``step``; return its path."""
        directory = os.fspath(directory)
        try:
            step = operator.index(step)
        except TypeError:
            raise CheckpointError(f"save(step={step!r}): the step must be an integer") from None
        if step < 0:
            raise CheckpointError(f"save(step={step}): the step must not be negative")
        slots = self._slots()
        if not slots:
            raise CheckpointError(f"{directory}: nothing to save: the Checkpoint holds no variables", path=directory)
        # One snapshot: the flowjit.Variables are read under their locks, all held at once, so a
        # call updating several of them in another thread is saved wholly before or wholly after.
        buffers = _buffers(slots)
        # Variables that live on cluster tasks are fetched, one call per task.
        with VariableGuard(buffers, (), f"a checkpoint save into {directory}"):
            held = read_values(buffers.values())
            arrays = {name: little_endian(name, _current(value, held)) for name, value in slots.items()}
        data = encode(arrays, step)              # everything that can fail does so before the disk is touched
        name = files.checkpoint_name(step)
        try:
            files.make_directory(directory)
            with files.locked(directory, self.lock_timeout):
                files.remove_temporaries(directory)
                path = files.write_atomically(directory, name, data)
                files.write_pointer(directory, name)
                files.prune(directory, self.keep, newest=name)
        except OSError as error:       # a full disk, no permission...: the previous checkpoint is still the latest
            raise CheckpointError(f"{directory}: cannot save the checkpoint of step {step}: {error}",
                                  path=directory) from error
        return path

    def restore(self, path) -> Restored:
        """Restore from a checkpoint file, or from a directory's latest checkpoint.

        Every check (the file's integrity, then each variable's presence, dtype and shape)
        runs before any variable is assigned: on any error nothing changes. Returns the
        arrays read, name -> array, with ``.step`` and ``.path``; variables are also assigned.
        """
        restored = read_checkpoint(path)
        slots = self._slots()
        problems = []
        for name in sorted(set(slots) | set(restored)):
            if name not in restored:
                problems.append((name, f"variable '{name}' is not in the checkpoint"))
                continue
            if name not in slots:
                problems.append((name, f"the checkpoint has a variable '{name}' that this Checkpoint does not hold"))
                continue
            found, value = restored[name], slots[name]
            dtype, shape = np.dtype(value.dtype).newbyteorder("="), tuple(value.shape)
            if (found.dtype, found.shape) != (dtype, shape):
                problems.append((name, f"variable '{name}' is {dtype.name}{list(shape)} but the checkpoint "
                                       f"holds {found.dtype.name}{list(found.shape)}"))
        if problems:
            lines = "".join(f"\n  {message}" for _, message in problems)
            raise CheckpointError(f"{restored.path}: does not match the variables, so nothing was restored:{lines}",
                                  path=restored.path, variable=problems[0][0])
        buffers = _buffers(slots)
        with VariableGuard(buffers, buffers, f"a checkpoint restore from {restored.path}"):   # all at once
            # Variables that live on cluster tasks are sent there, one call per task (a task
            # restarted since holds them again after this).
            write_values([(storage_of(value), restored[name]) for name, value in slots.items()
                          if storage_of(value) is not None])
            for name, value in slots.items():
                if storage_of(value) is None and is_variable(value):
                    value.assign(restored[name].copy())
        return restored

    def restore_latest(self, directory) -> Restored | None:
        """On a restart: restore the directory's latest checkpoint, or return None when it has none."""
        if self.latest(directory) is None:
            return None
        return self.restore(directory)

    @staticmethod
    def latest(directory) -> str | None:
        """The path of the directory's latest complete checkpoint, or None when it has none."""
        return files.latest_path(os.fspath(directory))

    @staticmethod
    def checkpoints(directory) -> list[CheckpointEntry]:
        """The directory's checkpoints by step: step, path, size, and whether it is the latest."""
        return files.entries(os.fspath(directory))


@dataclass
class CheckpointPolicy:
    """When a training loop saves: every ``every_steps`` steps and/or every ``every_seconds``
    seconds since the last save (whichever comes first).

    Both count from the last save, recorded by ``saved(step, now)``; before any, from
    ``last_step`` (the step training started or resumed at) and ``last_time`` (when the policy
    was made). ``now`` is ``time.monotonic()`` unless given (give it from that clock).
    """

    every_steps: int | None = None
    every_seconds: float | None = None
    last_step: int = 0
    last_time: float = field(default_factory=time.monotonic)

    def __post_init__(self):
        if self.every_steps is None and self.every_seconds is None:
            raise CheckpointError("CheckpointPolicy: give every_steps, every_seconds or both")
        if self.every_steps is not None and (not isinstance(self.every_steps, int) or self.every_steps < 1):
            raise CheckpointError(f"CheckpointPolicy(every_steps={self.every_steps!r}): must be an integer >= 1")
        if self.every_seconds is not None and not self.every_seconds > 0:
            raise CheckpointError(f"CheckpointPolicy(every_seconds={self.every_seconds!r}): must be > 0")

    def due(self, step: int, now: float | None = None) -> bool:
        """Whether to save at ``step``."""
        if self.every_steps is not None and step - self.last_step >= self.every_steps:
            return True
        now = time.monotonic() if now is None else now
        return self.every_seconds is not None and now - self.last_time >= self.every_seconds

    def saved(self, step: int, now: float | None = None) -> None:
        """Record a save (or a restore) at ``step``: the intervals count from here."""
        self.last_step = step
        self.last_time = time.monotonic() if now is None else now
