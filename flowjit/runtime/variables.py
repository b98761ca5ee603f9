"""Variable storage: one buffer per variable, found by its unique name.

A graph names a variable by a string (``read_variable {var="w"}``); the process-wide
registry maps that name to the ``VariableBuffer`` holding the value, so any executable
(the straight-line driver, the multi-device executor, the interpreter) can be built from
a graph alone.  The registry holds buffers weakly: a variable nobody refers to any more
(no ``flowjit.Variable``, no cached program) goes away and frees its name.

A buffer's ``value`` is an ndarray owned by the buffer alone: compiled programs write it
in place, so nothing else may hold it (reads that outlive the next write copy it, and
results never alias it).
"""

from __future__ import annotations

import re
import threading
import weakref

import numpy as np

from flowjit.errors import FlowjitError


class VariableError(FlowjitError):
    """A variable that does not exist, or a value that does not fit one."""


class VariableBuffer:
    """The storage of one variable: its unique ``name`` and its ``value`` (an owned ndarray)."""

    __slots__ = ("name", "value", "device", "__weakref__")

    def __init__(self, name: str, value: np.ndarray, device: str | None = None):
        self.name = name
        self.value = value
        self.device = device

    def __repr__(self) -> str:
        return f"<VariableBuffer '{self.name}' {self.value.dtype}{list(self.value.shape)}>"


_REGISTRY: "weakref.WeakValueDictionary[str, VariableBuffer]" = weakref.WeakValueDictionary()
_LOCK = threading.Lock()
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_SUFFIX = re.compile(r"^(.*?)(?:_(\d+))?$")


def create(name: str, value: np.ndarray, device: str | None = None) -> VariableBuffer:
    """A new buffer under ``name``, or ``name_1``, ``name_2``... when that is taken (TensorFlow's
    rule: variables of one process have distinct names, which checkpoints key on)."""
    if not _NAME.match(name):
        raise VariableError(f"'{name}' cannot name a variable: use letters, digits, '_', '.', '/' and '-', "
                            f"starting with a letter or '_'")
    with _LOCK:
        unique = name
        if unique in _REGISTRY:
            base = _SUFFIX.match(name).group(1)
            number = 1
            while f"{base}_{number}" in _REGISTRY:
                number += 1
            unique = f"{base}_{number}"
        buffer = VariableBuffer(unique, value, device)
        _REGISTRY[unique] = buffer
        return buffer


def lookup(name: str, where: str = "") -> VariableBuffer:
    """The live buffer named ``name``; an error naming ``where`` it was needed when none is."""
    buffer = _REGISTRY.get(name)
    if buffer is None:
        raise VariableError(f"variable '{name}'{' (used by ' + where + ')' if where else ''} does not exist: "
                            f"no live flowjit.Variable has that name")
    return buffer


def live_names() -> list[str]:
    return sorted(_REGISTRY.keys())
