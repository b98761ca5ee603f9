"""State that outlives one run of the interpreter: variable values."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from flowjit.errors import FlowjitError


class State:
    """Variables by name.

    ``variables`` holds plain arrays (a state of its own); ``buffers`` maps names to the
    ``VariableBuffer``s of live ``flowjit.Variable``s, which the interpreter then reads and
    writes as compiled programs do.  A read returns a copy (results never alias a variable);
    a write copies the value in."""

    def __init__(self, variables: dict[str, np.ndarray] | None = None,
                 buffers: Mapping[str, object] | None = None):
        self.variables: dict[str, np.ndarray] = dict(variables or {})
        self.buffers = dict(buffers or {})

    def read(self, name: str) -> np.ndarray:
        if name in self.buffers:
            return self.buffers[name].value.copy()
        try:
            return self.variables[name].copy()
        except KeyError:
            raise FlowjitError(f"variable '{name}' has no value (initialize it first)") from None

    def write(self, name: str, value: np.ndarray) -> None:
        if name in self.buffers:
            buffer = self.buffers[name]
            value = np.asarray(value)
            if value.shape != buffer.value.shape or value.dtype != buffer.value.dtype:
                raise FlowjitError(f"variable '{name}' is {buffer.value.dtype}{list(buffer.value.shape)}; "
                                   f"cannot store {value.dtype}{list(value.shape)} into it")
            np.copyto(buffer.value, value)
            return
        self.variables[name] = np.array(value, copy=True)
