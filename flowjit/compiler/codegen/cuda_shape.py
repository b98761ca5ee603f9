"""How CUDA kernels are shaped: threads a block, parts of a whole-domain reduction, and the
``FLOWJIT_CUDA_*`` settings (unrolls, threads a row, row elements in registers) with the
measurements that chose their defaults.  Read by the CUDA writer (cuda_writer.py) and the
launch (cuda.py)."""

from __future__ import annotations

import os

BLOCK = 128                 # threads of a reduce kernel's block by default (a power of two)
WARP = 32                   # at least: its reductions shuffle within whole warps
MAX_WARPS = 32              # at most 1024 threads: a shared slot per warp
MAX_PARTS = 1024            # a whole-domain reduction: at most this many blocks (parts),
PART_MIN = 16384            # of this many elements each at least,
PART_THREADS = 256          # of this many threads
COLUMN_LANES = 8            # a column block: 32 adjacent columns by this many lanes of rows (a warp each)
COLUMN_BLOCKS = 1024        # a column reduction's rows split so that its blocks number at most this,
COLUMN_SPLIT_ROWS = 256     # each split of this many rows at least
THREAD_ROWS = 1 << 16       # short rows (``across``) get a thread each from this many rows on (a GPU's worth)
ROW_UNROLL = 4              # row elements a thread takes per trip of a pass (measured: see row_unroll)
LOOP_UNROLL = 4             # elements a thread of a loop kernel takes per trip (measured: see loop_unroll)


def row_unroll() -> int:
    """Row elements per trip of a reduce kernel's pass: ``FLOWJIT_CUDA_ROW_UNROLL`` (1 to 8), else
    ROW_UNROLL.  One thread's loads are otherwise issued one at a time, each after the previous
    element's accumulation.  On an H100 (64M float32, rows of 1024, 64 threads a row; ms for
    1/2/4 elements a trip, session 8): layernorm 0.476/0.417/0.340,
    softmax 0.368/0.363/0.327."""
    return _setting("FLOWJIT_CUDA_ROW_UNROLL", ROW_UNROLL, lambda n: 1 <= n <= 8, "1 to 8")


# Threads per row of a reduce kernel.  Measured on an H200 with the row in registers (64M
# float32, rows of 1024, ms per call back to back for 64/128/256 threads): softmax
# 0.215/0.189/0.215, layernorm 0.285/0.247/0.300 (read by each pass instead, at 64 threads:
# 0.313 and 0.349).  An H100 without registers had 64 best: softmax 0.378/0.407/0.453.
ROW_THREADS = 128
ROW_SLOTS = 16              # row elements a thread keeps in registers at most (row_slots)
REGISTER_WORDS = 64         # 32-bit registers those elements may take per thread at most
REGISTER_FILE = 65536       # 32-bit registers a block may use (sm_70 to sm_90)
KERNEL_WORDS = 32           # registers a row kernel takes besides its row's elements (about)


def row_threads() -> int:
    """Threads per row of a reduce kernel: ``FLOWJIT_CUDA_ROW_THREADS`` (a power of two, 32 to
    1024), else ROW_THREADS."""
    return _setting("FLOWJIT_CUDA_ROW_THREADS", ROW_THREADS, lambda n: WARP <= n <= 1024 and not n & (n - 1),
                    "a power of two from 32 to 1024")


def power_of_two_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def threads_for_row(length: int, most: int) -> int:
    """A block's threads for rows of ``length``: whole warps, a power of two covering the row,
    at most ``most``.  The writer of a row kept in registers and the launch both ask this."""
    return min(most, max(WARP, power_of_two_at_least(max(1, length))))


def register_budget(threads: int) -> int:
    """32-bit registers a thread of a ``threads``-thread block may give its row's elements: at
    most REGISTER_WORDS, and few enough that the block fits the register file."""
    return min(REGISTER_WORDS, REGISTER_FILE // threads - KERNEL_WORDS)


def row_slots() -> int:
    """Row elements a reduce kernel's thread keeps in registers at most: ``FLOWJIT_CUDA_ROW_SLOTS``
    (0 to 64; 0: never), else ROW_SLOTS.  A row of at most that many times the block's threads is
    loaded once and every pass reads it from registers; a longer one is read again by each pass."""
    return _setting("FLOWJIT_CUDA_ROW_SLOTS", ROW_SLOTS, lambda n: 0 <= n <= 64, "0 to 64")


def loop_unroll() -> int:
    """Elements per trip of a loop kernel's grid-stride loop: ``FLOWJIT_CUDA_LOOP_UNROLL`` (1 to 8),
    else LOOP_UNROLL.  With one element a trip a thread has one load in flight: a wave of threads
    keeps a megabyte in flight, too little to cover an HBM's latency.  On an H200 (64M float32,
    ms per call back to back for 1/2/4 a trip; its copy bound 0.129): chain 0.184/0.159/0.151,
    gelu 0.186/0.166/0.155; black_scholes (16M float64) 0.354/0.352/0.348."""
    return _setting("FLOWJIT_CUDA_LOOP_UNROLL", LOOP_UNROLL, lambda n: 1 <= n <= 8, "1 to 8")


def _setting(variable: str, default: int, valid, expected: str) -> int:
    """The integer setting ``variable``, else ``default``; ``ValueError`` naming ``expected``."""
    value = int(os.environ.get(variable, default))
    if not valid(value):
        raise ValueError(f"{variable}={value}: expected {expected}")
    return value
