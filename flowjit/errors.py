"""The errors flowjit raises, and the source locations they point at.

Every error a user can cause names the op, the shapes and dtypes involved, and the
user's own ``file:line``: frames inside flowjit (and numpy's dispatch machinery) are
skipped, as JAX's ``source_info_util.user_frames`` does.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from dataclasses import dataclass

import numpy as np

_FLOWJIT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_NUMPY_DIR = os.path.dirname(os.path.abspath(np.__file__)) + os.sep
_SKIPPED_PREFIXES = (_FLOWJIT_DIR, _NUMPY_DIR)
# User code that ships inside the package: the benchmark's program corpus is written as users
# write numpy, so errors and source locations point at its lines, as they would at a user's.
_USER_CODE_PREFIXES = (os.path.join(_FLOWJIT_DIR, "bench", "programs") + os.sep,)
# Code that is neither flowjit's nor the user's: the standard library and installed packages.
_LIBRARY_PREFIXES = tuple(sorted({os.path.abspath(sysconfig.get_paths()[key]) + os.sep
                                  for key in ("stdlib", "platstdlib", "purelib", "platlib")})) + (_NUMPY_DIR,)


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


def _outer_frame(frame, skipped: tuple[str, ...]):
    """(the innermost frame from ``frame`` outwards whose file is not under ``skipped``, how many
    frames out it is: 0 for ``frame`` itself); (None, depth) when every frame is skipped."""
    depth = 0
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename.startswith(_USER_CODE_PREFIXES) or (
                not filename.startswith(skipped) and not filename.startswith("<frozen")):
            return frame, depth
        frame, depth = frame.f_back, depth + 1
    return None, depth


def user_location(extra_skip: int = 0) -> Location | None:
    """The innermost frame of the caller's stack that is not flowjit or numpy code."""
    frame, _ = _outer_frame(sys._getframe(1 + extra_skip), _SKIPPED_PREFIXES)
    return None if frame is None else Location(frame.f_code.co_filename, frame.f_lineno)


def user_frame(extra_skip: int = 0):
    """The frame ``user_location`` names (the caller's innermost frame outside flowjit and
    numpy), or None."""
    return _outer_frame(sys._getframe(1 + extra_skip), _SKIPPED_PREFIXES)[0]


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning the caller raises point at the user's code: the
    innermost frame outside flowjit, numpy, numba and the standard library (functools' wrappers);
    other installed packages count as the user's (a user's code may be one)."""
    frame, depth = sys._getframe(1), 1
    while frame is not None and _warning_internal(frame.f_code.co_filename):
        frame, depth = frame.f_back, depth + 1
    return depth


@functools.cache
def _warning_skipped() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(flowjit, numpy and numba; the standard library; the installed packages within it)."""
    import importlib.util
    spec = importlib.util.find_spec("numba")
    numba_dir = (os.path.dirname(spec.origin) + os.sep,) if spec is not None and spec.origin else ()
    paths = sysconfig.get_paths()
    standard = tuple({os.path.abspath(paths[key]) + os.sep for key in ("stdlib", "platstdlib")})
    packages = tuple({os.path.abspath(paths[key]) + os.sep for key in ("purelib", "platlib")})
    return (_FLOWJIT_DIR, _NUMPY_DIR) + numba_dir, standard, packages


def _warning_internal(filename: str) -> bool:
    ours, standard, packages = _warning_skipped()
    if filename.startswith(_USER_CODE_PREFIXES):
        return False
    if filename.startswith("<frozen") or filename.startswith(ours):
        return True
    return filename.startswith(standard) and not filename.startswith(packages)


def _traceback_files(error: BaseException) -> list[tuple[str, int]]:
    """(file, line) of each frame the error passed through, innermost first."""
    frames = []
    traceback = error.__traceback__
    while traceback is not None:
        frames.append((traceback.tb_frame.f_code.co_filename, traceback.tb_lineno))
        traceback = traceback.tb_next
    return frames[::-1]


def raised_inside_flowjit(error: BaseException) -> bool:
    """Whether the innermost frame of ``error`` that is not library code (numpy, the standard
    library, installed packages) is flowjit's: then flowjit, not the user's code, raised it.  The
    outermost frame, the one that caught it, is not counted."""
    for filename, _ in _traceback_files(error)[:-1]:
        if filename.startswith(_USER_CODE_PREFIXES):
            return False
        if filename.startswith(_FLOWJIT_DIR):
            return True
        if not filename.startswith(_LIBRARY_PREFIXES) and not filename.startswith("<frozen"):
            return False
    return False


def innermost_user_location(error: BaseException) -> Location | None:
    """The user's line that ``error`` passed through last (the line that called into flowjit)."""
    for filename, line in _traceback_files(error):
        if filename.startswith(_USER_CODE_PREFIXES) or (
                not filename.startswith(_SKIPPED_PREFIXES + _LIBRARY_PREFIXES) and not filename.startswith("<frozen")):
            return Location(filename, line)
    return user_location(1)


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


class UnsupportedAttributeError(TraceError, AttributeError):
    """An ndarray attribute or method flowjit does not trace (``x.cumsum``), or no such attribute."""


class UnsupportedOperatorError(TraceError, TypeError):
    """A Python operator or builtin flowjit does not trace on arrays (``x << 1``)."""


class UnsupportedInputError(TraceError, TypeError):
    """A value that cannot enter a trace: an ndarray subclass with semantics of its own
    (``np.matrix``, ``np.ma.MaskedArray``), or a Python object that is neither array nor number."""


class InternalError(TraceError):
    """An error raised inside flowjit (or a library it drives) that no check above caught: a bug in
    flowjit, reported with the user's file:line instead of a bare library traceback.  The raised
    object also subclasses the original builtin class (``except TypeError`` still catches it)."""

    _classes: dict = {}

    def __str__(self) -> str:          # OSError and friends would print their errno fields
        return f"{self.location}: {self.message}" if self.location is not None else self.message

    @classmethod
    def wrapping(cls, error: BaseException, doing: str, location: "Location | None") -> "InternalError":
        """``error`` (raised while ``doing``) as an InternalError, keeping its builtin class."""
        base = type(error)
        while base.__module__ != "builtins":
            base = base.__base__
        wrapper = cls if base is Exception else cls._classes.get(base)
        if wrapper is None:
            wrapper = cls._classes[base] = type(f"Internal{base.__name__}", (cls, base), {"__module__": __name__})
        origin = type(error).__module__.split(".")[0]
        kind = type(error).__name__ if origin == "builtins" else f"{origin} {type(error).__name__}"
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        first_line = ": ".join(lines[:2]) if lines[:1] and lines[0].startswith("Failed in") else \
            (lines[0] if lines else "")
        if isinstance(error, OSError):
            return wrapper(f"{doing} failed on a file operation ({kind}: {first_line}); check the path "
                           f"and its permissions (FLOWJIT_CACHE_DIR for the kernel cache)", location)
        return wrapper(f"{doing} failed inside flowjit ({kind}: {first_line}); this is a bug in flowjit, "
                       f"please report it with this message", location)


class CheckpointError(FlowjitError):
    """A checkpoint that cannot be written, found, read or restored: names the file and,
    where one is to blame, the variable."""

    def __init__(self, message: str, path: str | None = None, variable: str | None = None):
        self.message = message
        self.path = path
        self.variable = variable
        super().__init__(message)


class KernelCacheWarning(UserWarning):
    """The kernel cache could not be used as asked (a directory that cannot be written, an
    entry that cannot be read): kernels compile in memory or again, and the program runs."""


class NumericsError(FlowjitError, FloatingPointError):
    """``check_numerics``: a kernel produced NaN or Inf.  Names the first op that did, its
    kernel and the user's line."""


class DeviceMemoryError(FlowjitError, MemoryError):
    """A device (a GPU) had no memory left for a program's buffers."""


class DeviceFault(FlowjitError):
    """A device (a GPU) reported an error while running a program's kernels (an illegal address,
    a launch failure): its context may be unusable until the process restarts."""
