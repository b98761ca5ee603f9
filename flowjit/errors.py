"""The errors flowjit raises, and the source locations they point at.

Every error a user can cause names the op, the shapes and dtypes involved, and the
user's own ``file:line``: frames inside flowjit (and numpy's dispatch machinery) are
skipped, as JAX's ``source_info_util.user_frames`` does.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

_FLOWJIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep
_SKIPPED_PREFIXES = (_FLOWJIT_DIR, _NUMPY_DIR)


class FlowjitError(Exception):
    """Base class of every error flowjit raises on purpose."""


@dataclass(frozen=True, slots=True)
class Location:
    """A place in the user's source: file and line (printed ``file:line``)."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def short_file(self) -> str:
        """The file relative to the working directory when it lies under it."""
        if not os.path.isabs(self.file):
            return self.file
        try:
            relative = os.path.relpath(self.file)
        except ValueError:
            return self.file
        return self.file if relative.startswith("..") else relative


def user_location(extra_skip: int = 0) -> Location | None:
    """The innermost frame of the caller's stack that is not flowjit or numpy code."""
    frame = sys._getframe(1 + extra_skip)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_SKIPPED_PREFIXES) and not filename.startswith("<frozen"):
            return Location(filename, frame.f_lineno)
        frame = frame.f_back
    return None


class TraceError(FlowjitError):
    """An error found while tracing a user's function, at the user's file:line."""

    def __init__(self, message: str, location: Location | None = None):
        self.message = message
        self.location = location
        where = f"{location}: " if location is not None else ""
        super().__init__(f"{where}{message}")


class ShapeError(TraceError, ValueError):
    """Operands whose shapes do not fit the op (broadcasting, matmul, reshape...)."""


class TracerConversionError(TraceError, TypeError):
    """A traced value used where Python needs a concrete one (``if``, ``bool()``...)."""


class UnsupportedFunctionError(TraceError, NotImplementedError):
    """A numpy function or ufunc flowjit does not trace."""


class ArgumentError(TraceError, TypeError):
    """A jitted function called with arguments that do not match its signature."""


class ScalarOverflowError(TraceError, OverflowError):
    """A Python int that does not fit the dtype numpy 2 computes in (``int8_array + 1000``)."""


class OpTypeError(TraceError, TypeError):
    """Operands whose dtypes the op does not accept."""


class UnsupportedDTypeError(TraceError, TypeError):
    """A dtype flowjit does not compile (object, str, complex, ...)."""
