"""Session state that outlives one run: variable values and random generators."""

from __future__ import annotations

import numpy as np

from flowjit.errors import FlowjitError


class State:
    """Variables by name, and one random generator per seed."""

    def __init__(self, variables: dict[str, np.ndarray] | None = None):
        self.variables: dict[str, np.ndarray] = dict(variables or {})
        self._generators: dict[int, np.random.Generator] = {}

    def read(self, name: str) -> np.ndarray:
        try:
            return self.variables[name]
        except KeyError:
            raise FlowjitError(f"variable '{name}' has no value (initialize it first)") from None

    def write(self, name: str, value: np.ndarray) -> None:
        self.variables[name] = np.array(value, copy=True)

    def generator(self, seed: int) -> np.random.Generator:
        if seed not in self._generators:
            self._generators[seed] = np.random.default_rng(seed)
        return self._generators[seed]
