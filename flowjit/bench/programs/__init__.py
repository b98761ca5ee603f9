"""The program corpus (the issue's ``bench/programs/``): ordinary numpy programs as people
write them, grouped by domain, each with a maker of its arguments at a given size.

They are written without flowjit in mind and are never rewritten to suit it: a program that
flowjit cannot compile stays as written and is reported as unsupported, naming the op.
``flowjit bench --suite programs`` checks each against numpy and times it against numpy,
jax.jit and torch.compile.
"""

from flowjit.bench.programs import arrays, finance, imaging, models, physics, statistics  # noqa: F401 (registers)
from flowjit.bench.programs.registry import PROGRAMS, Program

__all__ = ["PROGRAMS", "Program"]
