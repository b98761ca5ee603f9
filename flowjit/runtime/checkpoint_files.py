"""A directory of checkpoints, written so that a crash at any moment leaves the last complete
checkpoint restorable and no half-written file under a checkpoint's name.

    DIR/ckpt-00000120.safetensors   one complete checkpoint per step (the name gives the step)
    DIR/latest                      the pointer: the name of the newest complete checkpoint
    DIR/.tmp-*                      files being written (left behind only by a crash)
    DIR/.lock                       held (flock) by the process saving into DIR

Every file is written under a temporary name in the same directory, flushed and fsynced,
renamed over its final name (atomic on POSIX) and the directory fsynced, so the rename
itself survives a power loss. A save writes the checkpoint, then the pointer, then deletes
old checkpoints: a crash before the pointer leaves the previous checkpoint the latest, and
nothing the pointer names is ever deleted. Saving holds the directory's lock, so stray
temporaries (which only a dead writer leaves) can be removed safely.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

import flowjit.files as files
from flowjit.errors import CheckpointError
from flowjit.runtime.checkpoint_format import SUFFIX

POINTER = "latest"
LOCK = ".lock"
TEMPORARY_PREFIX = files.TEMPORARY_PREFIX
_CHECKPOINT_NAME = re.compile(r"ckpt-(\d+)" + re.escape(SUFFIX))


def checkpoint_name(step: int) -> str:
    return f"ckpt-{step:08d}{SUFFIX}"


def step_of(name: str) -> int | None:
    """The step a checkpoint's file name gives, or None for any other file."""
    match = _CHECKPOINT_NAME.fullmatch(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class CheckpointEntry:
    """One checkpoint file of a directory."""

    step: int
    path: str
    size: int
    latest: bool


def fsync_directory(directory: str) -> None:
    files.fsync_directory(directory, strict=True)        # a checkpoint must know its rename is durable


def make_directory(directory: str) -> None:
    """Create ``directory`` (and parents) durably: each new entry's parent is fsynced."""
    missing = []
    path = os.path.abspath(directory)
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
        fsync_directory(os.path.dirname(path))


def write_atomically(directory: str, name: str, data: bytes) -> str:
    """Write ``data`` to ``directory/name`` so that the name holds either its old content or all
    of ``data``, durably, whatever moment the process dies at."""
    return files.write_atomically(os.path.join(directory, name), data, strict=True)


@contextlib.contextmanager
def locked(directory: str, timeout: float):
    """Hold ``directory``'s writer lock (an flock, released by the kernel if the holder dies);
    wait for it at most ``timeout`` seconds."""
    with files.directory_lock(os.path.join(directory, LOCK), timeout, poll=0.01, strict=True) as held:
        if not held:
            raise CheckpointError(f"{directory}: another process has been saving a checkpoint there for "
                                  f"over {timeout:g} s (it holds {LOCK}); not saving", path=directory)
        yield


def read_pointer(directory: str) -> str | None:
    """The file name the ``latest`` pointer holds, or None when there is no pointer."""
    path = os.path.join(directory, POINTER)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    name = text.strip()
    if step_of(name) is None or text != name + "\n":
        raise CheckpointError(f"{path}: the latest-checkpoint pointer is corrupt (it holds {text[:80]!r}, not a "
                              f"checkpoint's file name)", path=path)
    return name


def write_pointer(directory: str, name: str) -> None:
    write_atomically(directory, POINTER, (name + "\n").encode())


def temporaries(directory: str) -> list[str]:
    """Files a save was writing when its process died (none where no save has made the
    directory yet: a writer can die before it creates it)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if name.startswith(TEMPORARY_PREFIX))


def remove_temporaries(directory: str) -> None:
    """Remove what dead writers left; only call with the directory's lock held."""
    for name in temporaries(directory):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(directory, name))


def entries(directory: str) -> list[CheckpointEntry]:
    """The directory's checkpoints by step (an empty list when it has none or does not exist)."""
    if not os.path.isdir(directory):
        return []
    latest = read_pointer(directory)
    found = []
    for name in os.listdir(directory):
        step = step_of(name)
        if step is None:
            continue
        path = os.path.join(directory, name)
        with contextlib.suppress(FileNotFoundError):          # deleted by a concurrent save
            found.append(CheckpointEntry(step, path, os.path.getsize(path), name == latest))
    return sorted(found, key=lambda entry: entry.step)


def prune(directory: str, keep: int | None, newest: str) -> None:
    """Delete all but the ``keep`` checkpoints of the highest steps, never ``newest`` (the file the
    pointer now names, even when older steps sort above it)."""
    if keep is None:
        return
    others = [entry for entry in entries(directory) if os.path.basename(entry.path) != newest]
    doomed = others[:max(len(others) - (keep - 1), 0)]
    for entry in doomed:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.path)
    if doomed:
        fsync_directory(directory)


def latest_path(directory: str) -> str | None:
    """The path of the directory's latest complete checkpoint, or None when it has none."""
    if not os.path.isdir(directory):
        return None
    name = read_pointer(directory)
    return None if name is None else os.path.join(directory, name)


def read_latest(directory: str) -> tuple[str, bytes]:
    """The path and bytes of the directory's latest checkpoint; an error when there is none."""
    for _ in range(3):           # a concurrent save may delete the file between pointer and open
        name = read_pointer(directory)
        if name is None:
            found = [os.path.basename(entry.path) for entry in entries(directory)]
            detail = (f"; it has {', '.join(found)} but no '{POINTER}' pointer (a save was interrupted before "
                      f"its first pointer, or the pointer was removed): restore one of them by its path"
                      if found else "")
            raise CheckpointError(f"{directory}: no checkpoint there{detail}", path=directory)
        path = os.path.join(directory, name)
        try:
            return path, read_file(path)
        except CheckpointError:
            if read_pointer(directory) == name:
                raise CheckpointError(f"{directory}: its '{POINTER}' pointer names {name}, which does not exist",
                                      path=path) from None
    raise CheckpointError(f"{directory}: the latest checkpoint kept changing while being read", path=directory)


def read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file or directory", path=path) from None
    except OSError as error:
        raise CheckpointError(f"{path}: cannot read the checkpoint: {error}", path=path) from error
