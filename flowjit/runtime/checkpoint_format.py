"""The bytes of one checkpoint file: safetensors, with flowjit's record in its metadata.

A checkpoint is a plain safetensors file (a little-endian u64 header length, a JSON header
naming each tensor's dtype, shape and byte range, then the raw little-endian data), so
any safetensors reader (torch, jax, numpy) opens it and nothing in it can run code. Its
header's ``__metadata__`` (a string -> string map) carries flowjit's record:

    flowjit.format          "1"
    flowjit.step            the step, in decimal
    flowjit.tensors         JSON: {name: {"dtype": "float32", "shape": [2, 3], "sha256": hex}}
    flowjit.record_sha256   sha256 of the three fields above, so that a flipped bit in the
                            step, a dtype or a checksum is caught like one in the data

Reading checks every layer: the safetensors framing (a truncated file fails there), the
record's own checksum, that the header's tensors are exactly the record's with the same
dtypes and shapes, and each tensor's sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from flowjit.errors import CheckpointError

FORMAT_VERSION = 1
SUFFIX = ".safetensors"
_KEYS = ("flowjit.format", "flowjit.step", "flowjit.tensors")

# safetensors' dtype names for the numpy dtypes flowjit computes with.
_SAFETENSORS_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16",
                       "U32": "uint32", "I32": "int32", "U64": "uint64", "I64": "int64",
                       "F16": "float16", "F32": "float32", "F64": "float64"}
SUPPORTED_DTYPES = frozenset(np.dtype(name) for name in _SAFETENSORS_DTYPES.values())


@dataclass(frozen=True, slots=True)
class TensorRecord:
    """One tensor as the checkpoint records it."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    sha256: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


@dataclass(frozen=True, slots=True)
class CheckpointHeader:
    """What a checkpoint file says about itself, read without its data."""

    path: str
    step: int
    tensors: tuple[TensorRecord, ...]     # sorted by name
    file_size: int

    @property
    def data_bytes(self) -> int:
        return sum(tensor.nbytes for tensor in self.tensors)


def checksum(array: np.ndarray) -> str:
    """sha256 of the array's little-endian, C-ordered bytes."""
    flat = np.asarray(array, order="C").reshape(-1)
    return hashlib.sha256(flat.view(np.uint8)).hexdigest()


def little_endian(name: str, value) -> np.ndarray:
    """The value as a C-contiguous little-endian array of a dtype a checkpoint can hold."""
    array = np.asarray(value)
    if array.dtype.newbyteorder("=") not in SUPPORTED_DTYPES:
        supported = ", ".join(sorted(dtype.name for dtype in SUPPORTED_DTYPES))
        raise CheckpointError(f"variable '{name}' has dtype {array.dtype}, which a checkpoint cannot hold "
                              f"(it holds {supported})", variable=name)
    return np.asarray(array, dtype=array.dtype.newbyteorder("<"), order="C")     # keeps 0-d arrays 0-d


def encode(arrays: Mapping[str, np.ndarray], step: int) -> bytes:
    """The checkpoint file's bytes for these arrays (already little-endian) at this step."""
    from safetensors.numpy import save
    tensors = {}
    for name in sorted(arrays):
        array = arrays[name]
        tensors[name] = {"dtype": array.dtype.name, "shape": list(array.shape), "sha256": checksum(array)}
    metadata = {"flowjit.format": str(FORMAT_VERSION), "flowjit.step": str(step),
                "flowjit.tensors": json.dumps(tensors, sort_keys=True, separators=(",", ":"))}
    metadata["flowjit.record_sha256"] = _record_checksum(metadata)
    return save(dict(arrays), metadata=metadata)


def _record_checksum(metadata: Mapping[str, str]) -> str:
    text = "\n".join(f"{key}={metadata[key]}" for key in _KEYS)
    return hashlib.sha256(text.encode()).hexdigest()


def read_header(path: str) -> CheckpointHeader:
    """The step and tensor records of the checkpoint at ``path``, checked against the file's
    safetensors header (dtypes, shapes, byte ranges, length) but without reading the data."""
    from safetensors import SafetensorError, safe_open
    try:
        with safe_open(path, framework="np") as handle:
            metadata = handle.metadata()
            layout = {name: (handle.get_slice(name).get_dtype(), tuple(handle.get_slice(name).get_shape()))
                      for name in handle.keys()}
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint file", path=path) from None
    except IsADirectoryError:
        raise CheckpointError(f"{path}: is a directory, not a checkpoint file", path=path) from None
    except SafetensorError as error:
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt): {error}",
                              path=path) from None
    layout = {name: (_SAFETENSORS_DTYPES.get(dtype, dtype), shape) for name, (dtype, shape) in layout.items()}
    return _checked_header(path, metadata, layout, os.path.getsize(path))


def decode(path: str, data: bytes) -> tuple[CheckpointHeader, dict[str, np.ndarray]]:
    """The header and arrays of a checkpoint whose bytes are ``data`` (read from ``path``),
    after every check: framing, record checksum, layout and each tensor's sha256."""
    from safetensors import SafetensorError
    from safetensors.numpy import load
    try:
        arrays = load(data)
    except SafetensorError as error:
        raise CheckpointError(f"{path}: not a readable checkpoint (truncated or corrupt): {error}",
                              path=path) from None
    (header_length,) = struct.unpack("<Q", data[:8])       # well-formed: load() accepted it
    metadata = json.loads(data[8:8 + header_length]).get("__metadata__")
    layout = {name: (array.dtype.name, array.shape) for name, array in arrays.items()}
    header = _checked_header(path, metadata, layout, len(data))
    for record in header.tensors:
        array = arrays[record.name]
        if checksum(array) != record.sha256:
            raise CheckpointError(f"{path}: variable '{record.name}' ({record.dtype}{list(record.shape)}) is "
                                  f"corrupt: its data does not match its sha256", path=path, variable=record.name)
        if not array.flags.writeable:
            arrays[record.name] = array.copy()
    return header, arrays


def _checked_header(path: str, metadata, layout: dict[str, tuple[str, tuple[int, ...]]],
                    file_size: int) -> CheckpointHeader:
    if not metadata or "flowjit.format" not in metadata:
        raise CheckpointError(f"{path}: a safetensors file but not a flowjit checkpoint (its metadata has "
                              f"no 'flowjit.format')", path=path)
    if metadata["flowjit.format"] != str(FORMAT_VERSION):
        raise CheckpointError(f"{path}: checkpoint format version {metadata['flowjit.format']!r}; this flowjit "
                              f"reads version {FORMAT_VERSION}", path=path)
    if any(key not in metadata for key in _KEYS) or \
            metadata.get("flowjit.record_sha256") != _record_checksum(metadata):
        raise CheckpointError(f"{path}: the checkpoint's record (step, dtypes, shapes, checksums) is corrupt: "
                              f"it does not match its own sha256", path=path)
    step = int(metadata["flowjit.step"])
    records = json.loads(metadata["flowjit.tensors"])
    tensors = []
    for name in sorted(set(records) | set(layout)):
        if name not in layout:
            raise CheckpointError(f"{path}: variable '{name}' is in the checkpoint's record but its data is "
                                  f"missing", path=path, variable=name)
        if name not in records:
            raise CheckpointError(f"{path}: variable '{name}' has data but is not in the checkpoint's record",
                                  path=path, variable=name)
        record = TensorRecord(name, np.dtype(records[name]["dtype"]), tuple(records[name]["shape"]),
                              records[name]["sha256"])
        dtype, shape = layout[name]
        if (dtype, tuple(shape)) != (record.dtype.name, record.shape):
            raise CheckpointError(f"{path}: variable '{name}' is recorded as {record.dtype}{list(record.shape)} "
                                  f"but stored as {dtype}{list(shape)}", path=path, variable=name)
        tensors.append(record)
    return CheckpointHeader(path, step, tuple(tensors), file_size)
