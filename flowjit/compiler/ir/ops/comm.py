"""Ops that move tensors between devices (whitepaper §3.2.2, §5.5).

``send`` and ``recv`` are inserted by partitioning, never traced: every edge that
crosses devices becomes ``send`` in the producer's partition and ``recv`` in the
consumer's, paired by a rendezvous key that names the source device, the destination
device and the tensor.  They are stateful so that no pass removes, merges, folds or
fuses them.  ``truncate16``/``extend16`` are the lossy 32 -> 16-bit transfer: the upper
16 bits of each float32 travel, and the lower ones come back as zeros.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.ir.ops.base import AttrKind, Op, OpKind, register, required
from flowjit.compiler.ir.ops.lowering import typed
from flowjit.compiler.ir.types import TensorType
from flowjit.errors import OpTypeError


def rendezvous_key(source: str, destination: str, tensor: str) -> str:
    """``source;destination;tensor``: device names in full, the tensor as ``node:port``."""
    return f"{source};{destination};{tensor}"


def _only_in_executor(arrays, attrs):
    raise RuntimeError("send and recv run only in the multi-device executor")


def _send_rule(types, attrs):
    return []


def _recv_rule(types, attrs):
    return [TensorType(attrs["shape"], attrs["dtype"])]


send = register(Op("send", OpKind.STATEFUL, 1, _send_rule, _only_in_executor,
                   attrs={"key": required(AttrKind.STR)}, stateful=True,
                   doc="hand a tensor to the rendezvous under key (source;destination;tensor)", complex=True))
recv = register(Op("recv", OpKind.STATEFUL, 0, _recv_rule, _only_in_executor,
                   attrs={"key": required(AttrKind.STR), "shape": required(AttrKind.INTS),
                          "dtype": required(AttrKind.DTYPE)}, stateful=True,
                   doc="wait for the tensor sent under key; does not hold a thread while waiting", complex=True))


def _truncate_rule(types, attrs):
    if types[0].dtype != np.float32:
        raise OpTypeError(f"truncate16 takes float32, got {types[0].dtype}")
    return [types[0].with_dtype(np.uint16)]


def _extend_rule(types, attrs):
    if types[0].dtype != np.uint16:
        raise OpTypeError(f"extend16 takes uint16, got {types[0].dtype}")
    return [types[0].with_dtype(np.float32)]


truncate16 = register(Op("truncate16", OpKind.ELEMENTWISE, 1, _truncate_rule,
                         lambda arrays, attrs: [(np.ascontiguousarray(arrays[0], np.float32).view(np.uint32)
                                                 >> 16).astype(np.uint16)],
                         doc="the upper 16 bits of each float32 (sign, exponent, 7 mantissa bits)",
                         lowering=typed(lambda c, a: f"np.uint16((np.int64(fj.float32_bits({a})) >> 16) & 0xFFFF)")))
extend16 = register(Op("extend16", OpKind.ELEMENTWISE, 1, _extend_rule,
                       lambda arrays, attrs: [(np.asarray(arrays[0]).astype(np.uint32) << 16).view(np.float32)],
                       doc="a float32 from its upper 16 bits, the lower 16 zero",
                       lowering=typed(lambda c, a: f"fj.bits_float32(np.int32(np.int64({a}) << 16))")))
