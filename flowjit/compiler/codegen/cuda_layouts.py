"""The CUDA reduce kernels' layouts other than a block per row (cuda_writer.py writes that one):
a mixin of ``CudaReduceWriter``, whose passes, accumulators and block reductions it uses.

Two strategies of the plan render otherwise, since a block per row reads them badly:

- ``columns`` (the innermost axis kept: ``x.sum(axis=0)``) runs in column blocks: 32
  adjacent columns (kept positions) by ``COLUMN_LANES`` lanes of rows, a warp each, so that a
  warp's loads are adjacent (a block per column read each element a row apart).  A lane adds
  every ``COLUMN_LANES``-th row of its column, in order; the first warp combines the lanes'
  totals in lane order through shared memory.  So that few columns still fill the GPU, the
  rows are split (``COLUMN_SPLITS``, from the sizes alone: up to ``COLUMN_BLOCKS`` blocks of
  at least ``COLUMN_SPLIT_ROWS`` rows): each split's totals go to partial buffers, and the
  last block of a group of columns to finish (an atomic count per group) adds them in split
  order and stores the columns' results.  The partials are group-major, 32 a (group, split):
  a group's last block reads only whole sectors no other group's block writes (a sector two
  groups shared could be read, and kept in an SM's L1 cache, before the other group wrote it).
- ``across`` (short rows) with at least ``THREAD_ROWS`` rows runs a thread per row (a
  launch like a loop kernel's, ``THREAD_ROWS = True`` in the module): each pass is a loop
  over the row, in order, with nothing to combine; fewer rows keep a block each.

A reduction of the whole domain in one pass (``in_parts``) runs in parts instead, a block each:
each block reduces its stretch into partials (buffers its launcher passes after the outputs,
``KernelSource.part_buffers``), and the last block to finish -- counted by an atomic add after a
memory fence -- combines them in order and computes what follows from the totals.  How many
parts (``PARTS`` in the module) depends on the domain's size alone, so results do not depend on
the GPU.
"""

from __future__ import annotations

import numpy as np

from flowjit.compiler.codegen.cuda_shape import COLUMN_BLOCKS, COLUMN_LANES, COLUMN_SPLIT_ROWS, THREAD_ROWS, WARP
from flowjit.compiler.codegen.scalar import CodegenError
from flowjit.compiler.codegen.writer import _identifier, split_index
from flowjit.compiler.ir.graph import Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.ops.reduction import ARG_REDUCTIONS, accumulator_dtype
from flowjit.compiler.ir.plan import ReduceStrategy
from flowjit.compiler.ir.types import DYNAMIC


class CudaLayouts:
    """Column blocks, a thread per row, and the whole domain in parts (see the module)."""

    def choose_layout(self) -> str:
        """How the kernel's rows map onto the GPU: ``columns`` for the plan's columns strategy,
        ``threads`` (a thread per row) for short rows across many rows, else ``blocks``."""
        strategy = self.plan.strategy
        if strategy is ReduceStrategy.COLUMNS and self.kept and len(self.plan.passes) == 1:
            return "columns"
        rows = int(np.prod([self.domain[axis] for axis in self.kept], dtype=np.int64))
        if strategy is ReduceStrategy.ACROSS and self.kept and rows >= THREAD_ROWS:
            return "threads"
        return "blocks"

    def write_thread_rows(self, passes: list, per_row: list[Value]) -> None:
        """A thread per row: each pass a loop over the row in order (its accumulations need no
        combining), per-row values and outputs by the same thread."""
        self.emit(1, "row = cuda.grid(1)")
        self.emit(1, "stride = cuda.gridsize(1)")
        self.emit(1, "while row < nrows:")
        self.lines.extend(split_index(2, "row", self.kept))
        self.compute_outer(2, 0)
        for current, (reductions, stores) in enumerate(passes):
            if reductions or stores:
                self.thread_pass(2, reductions, stores, "0", "ninner", "1")
                self.finish_reductions(2, reductions)
            self.compute_outer(2, current + 1)
        for value in per_row:
            self.store(2, value)
        self.emit(2, "row += stride")

    def thread_pass(self, depth: int, reductions: list[Node], stores: list[Value], start: str, end: str,
                    step: str) -> None:
        """A pass in which each thread walks its own positions ``start``, ``start + step``...
        below ``end`` in order, accumulating into its accumulators (no block reduction)."""
        self.start_accumulators(depth, reductions, comments=True)
        self.emit(depth, f"t = {start}")
        self.emit(depth, f"while t < {end}:")
        self.write_elements(depth + 1, ["t"], "t", step, self.reduced,
                            self.needed([node.inputs[0] for node in reductions] + stores), reductions, stores)
        self.emit(depth + 1, f"t += {step}")

    def finish_reductions(self, depth: int, reductions: list[Node]) -> None:
        """Each reduction's value from its accumulator."""
        for node in reductions:
            self.emit(depth, f"{self.var(node.output)} = {self.reduction_result(node, f'acc_{_identifier(node.output)}')}")

    def column_splits(self) -> int:
        """How many splits a column reduction's rows take: enough blocks (up to ``COLUMN_BLOCKS``
        with the groups of 32 columns) of at least ``COLUMN_SPLIT_ROWS`` rows each; one where a
        dimension is dynamic.  From the sizes alone, so the result does not depend on the GPU."""
        if any(self.domain[axis] == DYNAMIC for axis in range(len(self.domain))):
            return 1
        self.columns = int(np.prod([self.domain[axis] for axis in self.kept], dtype=np.int64))
        self.groups = -(-self.columns // WARP)
        rows = int(np.prod([self.domain[axis] for axis in self.reduced], dtype=np.int64))
        if not self.groups:
            return 1
        return max(1, min(rows // COLUMN_SPLIT_ROWS, COLUMN_BLOCKS // self.groups))

    def write_columns(self, only_pass: tuple, per_row: list[Value], reductions: list[Node]) -> None:
        """Column blocks (``columns``): 32 adjacent columns by ``nthreads // 32`` lanes of rows.
        Lane ``warp`` of column ``lane`` adds its split's rows ``warp``, ``warp + lanes``... in
        order; the first warp combines the lanes' totals in lane order, then (split rows) the
        splits' in split order in the last block of the group to finish, and stores the
        column's results.  A thread past the last column reads nothing (its index is the last
        column's, its loop empty)."""
        pass_reductions, stores = only_pass
        if any(node.op in ARG_REDUCTIONS for node in reductions):     # (plan-reductions keeps them in rows)
            raise CodegenError(f"kernel {self.name}: a columns plan with argmax/argmin (they have no column blocks)")
        self.splits = self.column_splits()
        split = self.splits > 1
        if split:
            self.scratch_parameters = self.part_buffers()      # (passed last, by the launcher)
        for node in reductions:
            name, dtype = _identifier(node.output), accumulator_dtype(node)
            self.emit(1, f"shared_{name} = cuda.shared.array({WARP * COLUMN_LANES}, np.{dtype.name})")
        if split:
            self.emit(1, "last = cuda.shared.array(1, np.int32)")
        self.emit(1, "lane = tid % 32")
        self.emit(1, "warp = tid // 32")
        self.emit(1, "lanes = nthreads // 32")
        self.emit(1, "ngroups = (nrows + 31) // 32")
        self.emit(1, f"nsplits = {self.splits}")
        self.emit(1, "work = cuda.blockIdx.x")
        self.emit(1, "while work < ngroups * nsplits:          # (blocks stride over groups of 32 columns, and splits)")
        self.emit(2, "group = work % ngroups")
        self.emit(2, "split = work // ngroups")
        self.emit(2, "row = group * 32 + lane")
        self.emit(2, "live = row < nrows")
        self.lines.extend(split_index(2, "min(row, nrows - 1)", self.kept))
        self.compute_outer(2, 0)
        self.emit(2, "low = split * ninner // nsplits          # (this split's rows)")
        self.emit(2, "high = (split + 1) * ninner // nsplits if live else low")
        self.thread_pass(2, pass_reductions, stores, "low + warp", "high", "lanes")
        for node in pass_reductions:
            self.emit(2, f"shared_{_identifier(node.output)}[tid] = acc_{_identifier(node.output)}")
        self.emit(2, "cuda.syncthreads()")
        self.emit(2, "if warp == 0:          # the lanes' totals, in lane order")
        self.emit(3, "w = 1")
        self.emit(3, "while w < lanes:")
        for node in pass_reductions:
            self.accumulate(4, node, f"shared_{_identifier(node.output)}[w * 32 + lane]", "")
        self.emit(4, "w += 1")
        finish = 3
        if split:
            for node in pass_reductions:       # (group-major, 32 a split: whole sectors of one group)
                name = _identifier(node.output)
                self.emit(3, f"partials_{name}[(group * nsplits + split) * 32 + lane] = acc_{name}")
            self.emit(3, "cuda.threadfence()         # (the partials are visible before the count says so)")
            self.emit(2, "cuda.syncthreads()")
            self.emit(2, "if tid == 0:")
            self.emit(3, "last[0] = cuda.atomic.add(done, group, 1) == nsplits - 1")
            self.emit(3, "cuda.threadfence()         # (and the other blocks' partials are read after the count)")
            self.emit(2, "cuda.syncthreads()")
            self.emit(2, "if last[0] and warp == 0:          # the last block of the group adds the splits, in order")
            for node in pass_reductions:
                name = _identifier(node.output)
                self.emit(3, f"acc_{name} = partials_{name}[group * nsplits * 32 + lane]")
            self.emit(3, "s = 1")
            self.emit(3, "while s < nsplits:")
            for node in pass_reductions:
                name = _identifier(node.output)
                self.accumulate(4, node, f"partials_{name}[(group * nsplits + s) * 32 + lane]", "")
            self.emit(4, "s += 1")
        self.emit(finish, "if live:")
        self.finish_reductions(finish + 1, pass_reductions)
        self.compute_outer(finish + 1, 1)
        for value in per_row:
            self.store(finish + 1, value)
        self.emit(2, "cuda.syncthreads()         # (the first warp has read the totals before the next work)")
        self.emit(2, "work += cuda.gridDim.x")

    def in_parts(self) -> bool:
        """Whether the kernel reduces its whole domain in parts, a block each: a plan with one
        row (no kept axis) and one pass that stores nothing full-shaped -- the plan's ``parts``
        strategy and more (the CPU also asks that every reduction fold into its vector lanes,
        which an int32 sum in int64 does not; blocks have no such lanes)."""
        return not self.kept and len(self.plan.passes) == 1 and not self.plan.passes[0].store

    def part_buffers(self) -> list[tuple[str, np.dtype]]:
        """The arrays a parts kernel takes after its outputs (``MAX_PARTS`` elements each, from the
        launcher): each reduction's partial totals (and argmax/argmin's positions), then the count
        of blocks done (one int32, zero at the launch)."""
        buffers = []
        for node in self.members:
            if node.op.kind is OpKind.REDUCTION:
                buffers.append((f"partials_{_identifier(node.output)}", np.dtype(accumulator_dtype(node))))
                if node.op in ARG_REDUCTIONS:
                    buffers.append((f"partials_at_{_identifier(node.output)}", np.dtype(np.int64)))
        return buffers + [("done", np.dtype(np.int32))]

    def write_parts(self, reductions: list[Node], per_row: list[Value]) -> None:
        """The whole domain in parts, a block each: each block reduces its stretch into its
        partials; the last block to finish (counted atomically) combines the partials in
        order.  How many parts depends on the domain's size alone (the launch's grid), so the
        result does not depend on the GPU."""
        self.emit(1, "last = cuda.shared.array(1, np.int32)")
        self.emit(1, "part = cuda.blockIdx.x")
        self.emit(1, "nparts = cuda.gridDim.x")
        self.emit(1, "low = part * ninner // nparts          # (this block's stretch of the domain)")
        self.emit(1, "high = (part + 1) * ninner // nparts")
        self.compute_outer(1, 0)
        self.write_pass(1, reductions, [], start="low + tid", end="high", finish=False)
        self.emit(1, "if tid == 0:")
        for node in reductions:
            name = _identifier(node.output)
            self.emit(2, f"partials_{name}[part] = acc_{name}")
            if node.op in ARG_REDUCTIONS:
                self.emit(2, f"partials_at_{name}[part] = at_{name}")
        self.emit(2, "cuda.threadfence()         # (the partials are visible before the count says so)")
        self.emit(2, "last[0] = cuda.atomic.add(done, 0, 1) == nparts - 1")
        self.emit(2, "cuda.threadfence()         # (and the other blocks' partials are read after the count)")
        self.emit(1, "cuda.syncthreads()")
        self.emit(1, "if last[0]:                   # the last block combines the partials, in order")
        self.start_accumulators(2, reductions)
        self.emit(2, "t = tid")
        self.emit(2, "while t < nparts:")
        for node in reductions:
            name = _identifier(node.output)
            self.accumulate(3, node, f"partials_{name}[t]", f"partials_at_{name}[t]")
        self.emit(3, "t += nthreads")
        for node in reductions:
            self.block_reduce(2, node)
        self.compute_outer(2, 1)
        if per_row:
            self.emit(2, "if tid == 0:")
            for value in per_row:
                self.store(3, value)
