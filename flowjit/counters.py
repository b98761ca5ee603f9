"""Counters since start: what ``flowjit.stats()`` returns and the tests read.

Kept apart from the code generator so tracing and printing IR never import numba.
"""

from __future__ import annotations


class Stats:
    def __init__(self):
        self.traces = 0
        self.executables = 0
        self.dispatchers: list = []           # numba dispatchers of every compiled kernel
        self.native_kernels = 0               # kernels running native entries, with no dispatchers (yet)
        self.native_loads = 0                 # native entries loaded from the kernel cache (codegen/native.py)

    def snapshot(self) -> dict:
        compiles = hits = 0
        for dispatcher in self.dispatchers:
            compiles += sum(dispatcher.stats.cache_misses.values())
            hits += sum(dispatcher.stats.cache_hits.values())
        return {"traces": self.traces, "executables": self.executables, "kernel_compiles": compiles,
                "disk_hits": hits + self.native_loads, "disk_misses": compiles, "native_loads": self.native_loads,
                "kernels": len(self.dispatchers) // 2 + self.native_kernels}


STATS = Stats()
