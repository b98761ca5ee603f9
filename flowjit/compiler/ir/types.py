"""Tensor types: a shape and a dtype, printed short as ``f32[64,784]``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from flowjit.errors import UnsupportedDTypeError

# Short names, in the order the printer and the error messages list them.
_SHORT_NAMES = {
    "bool": "bool",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "complex64": "c64",
    "complex128": "c128",
}
_BY_SHORT_NAME = {short: np.dtype(long) for long, short in _SHORT_NAMES.items()}


# A dimension whose size is given when the program runs (a placeholder's None, printed ``?``).
# Type rules run unchanged on this stand-in size while a graph is built; a session
# specializes the graph to the fed sizes (passes/specialize.py) before any other pass.
DYNAMIC = 2**31 - 1


def check_dtype(dtype, what: str = "value") -> np.dtype:
    """Return ``dtype`` as a numpy dtype, or raise naming why it is not supported."""
    try:
        dtype = np.dtype(dtype)
    except TypeError as error:
        raise UnsupportedDTypeError(f"{what} has no numpy dtype: {error}") from None
    if not dtype.isnative:
        order = "big" if dtype.byteorder == ">" else "little"
        native = dtype.newbyteorder("=").str
        raise UnsupportedDTypeError(
            f"{what} has dtype {dtype.str} ({order}-endian, not this machine's byte order): flowjit "
            f"computes in native byte order; convert it first with .astype('{native}')")
    if dtype.name in _SHORT_NAMES:
        return dtype
    if dtype.kind in "OUSV":
        reason = "only boolean, integer, floating-point and complex arrays can be traced"
    else:
        reason = "this dtype is not supported"
    supported = ", ".join(_SHORT_NAMES)
    raise UnsupportedDTypeError(
        f"{what} has dtype {dtype}: {reason} (supported: {supported})")


def dtype_short_name(dtype: np.dtype) -> str:
    return _SHORT_NAMES[np.dtype(dtype).name]


def dtype_from_short_name(name: str) -> np.dtype:
    """``f32`` -> float32; also accepts numpy's own names (``float32``)."""
    if name in _BY_SHORT_NAME:
        return _BY_SHORT_NAME[name]
    if name in _SHORT_NAMES:
        return np.dtype(name)
    raise KeyError(name)


@dataclass(frozen=True, slots=True)
class TensorType:
    """The static type of a value: its full shape and its dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", check_dtype(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        size = 1
        for dim in self.shape:
            size *= dim
        return size

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def with_dtype(self, dtype) -> "TensorType":
        return TensorType(self.shape, dtype)

    def with_shape(self, shape) -> "TensorType":
        return TensorType(shape, self.dtype)

    def __str__(self) -> str:
        return f"{dtype_short_name(self.dtype)}[{','.join('?' if d == DYNAMIC else str(d) for d in self.shape)}]"

    @property
    def dynamic(self) -> bool:
        """Whether a dimension's size is given only at run time (``?``)."""
        return DYNAMIC in self.shape

    __repr__ = __str__

    @staticmethod
    def of(array) -> "TensorType":
        array = np.asarray(array)
        return TensorType(array.shape, array.dtype)


def part_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's real and imaginary parts (complex64: float32)."""
    return np.dtype(np.float32 if np.dtype(dtype) == np.complex64 else np.float64)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel computes a value in (float16 values compute in float32)."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)
