"""A compiled kernel, and the text its key hashes: what every backend shares.

Nothing here imports numba, so the CUDA backend, which launches PTX it keeps on disk through
CuPy, loads none of the CPU toolchain.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

# How numba compiles every CPU kernel the driver calls (kernel modules, scans, gathers):
# numpy's error model; serial kernels without the GIL, so that kernels on two devices of one
# process run at once (the multi-device executor runs each device on its own thread).
# Parallel ones keep it: where neither OpenMP nor TBB is there, numba's workqueue threading
# layer aborts the process when two threads launch parallel kernels at once.  Part of the
# kernel cache's key: a change compiles every kernel again.
KERNEL_FLAGS = dict(error_model="numpy", no_cfunc_wrapper=True)
SERIAL_FLAGS = dict(KERNEL_FLAGS, nogil=True)


@dataclass
class CompiledKernel:
    """A kernel as a backend compiled it: its callables (``serial``, ``parallel``) under its key."""

    name: str
    key: str
    source: str
    serial: object
    parallel: object
    path: str | None = None
    recorded: int = field(default=0)         # cache files listed in the manifest so far
    fma: bool = True
    tiered: object = None                    # the backend's ``TieredKernel`` for the parallel twin, if any


@functools.lru_cache(maxsize=4096)
def canonical(text: str) -> str:
    """What the key hashes: the code without its comments, each function's local names
    (parameters, assigned names, loop variables) renamed in the order they first appear.
    Comments carry the IR lines with the traced shapes and the kernel's place in its program,
    and the local names are the IR's value names (``v_mul_12``): none of them changes the
    compiled code, so new sizes, other programs and one pattern at several places of a
    program (each layer's bias and ReLU, each parameter's update) share one compiled kernel.
    Global names (``np``, ``fj``, ``range``), attributes and module-level code are kept as
    they are.  (Text, not ``ast``: a key is computed for every kernel of every program a
    process lowers, and this is a few times faster than parsing.)"""
    if _RENAMED.search(text):       # a name of the renamed form already there: rename nothing
        return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    out: list[str] = []
    function: list[str] = []          # the lines of the function being read, from its ``def``
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        if line[:1] not in ("", " ", "\t"):                  # column 0: a function ends here
            out.extend(_rename_locals(function))
            function = []
        (function if line.startswith("def ") or function else out).append(line)
    out.extend(_rename_locals(function))
    return "\n".join(out)


_DEF = re.compile(r"def\s+\w+\s*\(([^)]*)\)")
_STORE = re.compile(r"^\s+(?:for\s+)?((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)\s*(?:in\b|[-+*/%&|^@]?=(?!=)|//=|\*\*=)")
_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
_RENAMED = re.compile(r"(?<![\w.])_l\d")            # what _rename_locals names locals
_KEYWORD_ARGUMENT = re.compile(r"\s*=(?!=)")            # ``f(name=...)``: the callee's name, kept


def _rename_locals(block: list[str]) -> list[str]:
    """One function's lines with its local names renamed ``_l0``, ``_l1``... by first use."""
    if not block:
        return block
    header = _DEF.match(block[0])
    local = {name.strip() for name in header.group(1).split(",") if name.strip()} if header else set()
    for line in block[1:]:
        stored = _STORE.match(line)
        if stored:
            local.update(name.strip() for name in stored.group(1).split(","))
    renamed: dict[str, str] = {}

    def rename(match: re.Match) -> str:
        name = match.group(0)
        if name not in local or _KEYWORD_ARGUMENT.match(match.string, match.end()) and match.string[:match.start()].strip():
            return name
        return renamed.setdefault(name, f"_l{len(renamed)}")
    return [block[0][:header.start(1)] + _NAME.sub(rename, block[0][header.start(1):]) if header else block[0]] + \
        [_NAME.sub(rename, line) for line in block[1:]]
