"""The random-number ops' scalar code: numba compiles the ops' own reference functions
(part of the kernel library: kernels call them as ``fj.rng_threefry2x32`` ...).

``ir/ops/random.py`` writes Threefry-2x32 and the bits-to-number conversions in numpy
operations that numba also compiles for scalars, with the same IEEE operations in the same
order; kernels call these compilations, so compiled numbers equal the interpreter's bit for
bit.  They are compiled without fastmath: the kernel's ``contract`` flag (a*b+c as one FMA)
applies to the kernel's own instructions, never to these, so no FMA changes a rounding.
"""

from __future__ import annotations

from numba import njit

from flowjit.compiler.ir.ops import random

_FLAGS = dict(error_model="numpy", fastmath=False)          # (cached by library_cache.py)

rng_threefry2x32 = njit(**_FLAGS)(random.threefry2x32_bits)
rng_uniform_f32 = njit(**_FLAGS)(random.uniform_f32)
rng_uniform_f64 = njit(**_FLAGS)(random.uniform_f64)
rng_normal_f64 = njit(**_FLAGS)(random.normal_f64)
