"""The program corpus's registry: each program is a plain numpy function plus a maker of
its arguments at a requested size.

The functions use nothing from flowjit and are written as people write numpy (the issue's
"bench/programs/"); ``@program`` only records them and returns the function unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Program:
    name: str
    function: Callable
    make: Callable[[int, np.random.Generator], tuple]   # (elements, rng) -> numpy arguments
    domain: str                                         # the module: models, finance, ...
    about: str                                          # one line for --help and the table

    def arguments(self, elements: int, seed: int = 0) -> tuple:
        return self.make(elements, np.random.default_rng(seed))


PROGRAMS: dict[str, Program] = {}


def program(make: Callable[[int, np.random.Generator], tuple], about: str):
    """Register the decorated function under its own name, with ``make(elements, rng)``
    giving its arguments: ``elements`` is the size of its largest array, input or
    intermediate (an attention block's score matrix, an n-body step's pair table)."""
    def register(function: Callable) -> Callable:
        name = function.__name__
        if name in PROGRAMS:
            if PROGRAMS[name].function.__code__.co_filename == function.__code__.co_filename:
                return function           # its file run again as another module (flowjit dump FILE:FUNC)
            raise ValueError(f"two corpus programs are named {name!r}")
        domain = function.__module__.rsplit(".", 1)[-1]
        PROGRAMS[name] = Program(name, function, make, domain, about)
        return function
    return register


# -- argument makers shared by the domains ------------------------------------------------------------
def rows(elements: int, width: int) -> tuple[int, int]:
    """A (rows, width) shape of about ``elements`` elements, at least one row."""
    return max(1, elements // width), width


def side(elements: int, per_pair: int = 1, multiple: int = 1) -> int:
    """n such that n * n * per_pair is about ``elements``, rounded down to ``multiple`` (at least it)."""
    n = int((elements / per_pair) ** 0.5)
    return max(multiple, n - n % multiple)


def normal32(rng: np.random.Generator, *shape) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32)


def uniform32(rng: np.random.Generator, low: float, high: float, *shape) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)
