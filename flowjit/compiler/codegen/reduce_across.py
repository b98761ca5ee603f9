"""Reductions of short rows across them: the part of reduce.ReduceWriter that renders the
``across`` strategy (passes/plan_reductions.py decides it: rows -- the reduced axes, one or a
window of several -- shorter than ``ACROSS_ROW``, nothing full-shaped stored, no argmax/argmin).

A row of 16 reduced in vector lanes is two blocks of lanes and a fold, and whatever the row's
results feed (a log after a log-sum-exp) is scalar code once per row.  Across rows, a block of
``BLOCK`` rows is reduced at once: each pass is a loop over the row position ``t`` (a loop per
reduced axis, for a window) outside a
loop over the block's rows ``r`` (consecutive along the last kept axis), which carries no dependency from one row to the next and so
vectorises, each row adding into its own accumulator in a stack array (in row order, at the
accumulator's dtype: the row's elements one after another, as a scalar loop adds them).  What
follows from a pass's totals is one loop over the block's rows after it, vectorised the same
way; per-row values live in stack arrays of ``BLOCK`` (``p_<name>``) between those loops, and
values a later pass reads again in scratch laid out position-major (``s_<name>[t * BLOCK + r]``),
so every loop reads and writes them contiguously; so is a copy of each input that runs along
the row and every kept axis (``st<k>_<input>``, stage_inputs), made at the block's start.
Blocks run in parallel.
"""

from __future__ import annotations

from flowjit.compiler.codegen.writer import _identifier, _identity, split_index, uniform_view
from flowjit.compiler.ir.graph import Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.ops.lowering import cast, constructor
from flowjit.compiler.ir.types import compute_dtype

BLOCK = 64          # rows reduced together: a block's accumulators and per-row values are stack arrays of it
STAGE_BYTES = 32 << 10          # at most this much of a block's stack for copies of its inputs (stage_inputs)


class AcrossWriter:
    """Methods of reduce.ReduceWriter (a KernelWriter): pass_values, pass_body, reduction_rule
    and reduction_result come from it."""

    def write_across(self, outputs: list[Value], rows) -> list[str]:
        start = len(self.lines)
        last = rows.kept[-1]
        self.constants(1)
        self.emit(1, f"ninner = {' * '.join(f'n{axis}' for axis in rows.reduced)}")
        depth = 2
        if len(rows.kept) == 1:
            self.emit(1, self.for_loop("chunk", f"(n{last} + {BLOCK - 1}) // {BLOCK}", outer=True))
        else:
            # The blocks of every row of the last kept axis, one parallel loop over them all.
            self.emit(1, f"nchunks = (n{last} + {BLOCK - 1}) // {BLOCK}")
            self.emit(1, self.for_loop("task", " * ".join([f"n{k}" for k in rows.kept[:-1]] + ["nchunks"]),
                                       outer=True))
            self.emit(depth, "chunk = task % nchunks")
            self.lines.extend(split_index(depth, "task // nchunks", rows.kept[:-1]))
        self.emit(depth, f"low = chunk * {BLOCK}")
        self.emit(depth, f"count = min(n{last}, low + {BLOCK}) - low")
        for value in sorted(rows.scratch, key=lambda v: rows.scratch_name[v]):
            self.emit(depth, f"{rows.scratch_name[value]} = fj.heap_array({constructor(value.dtype)}, "
                             f"ninner * {BLOCK})")
        rows.carried = self.carried(rows, outputs)
        for value in sorted(rows.carried, key=rows.order.__getitem__):
            self.emit(depth, f"p_{_identifier(value)} = fj.stack_array({constructor(value.dtype)}, {BLOCK})")
        known: list[Value] = []
        self.across_per_row(depth, rows, known, upto=0, finished=[], outputs=[])
        stage_at, self.staging = len(self.lines), None
        if len(rows.reduced) == 1:
            # (an input that does not run along every kept axis is read alike by other blocks, a
            # window's rows too short for a copy to pay: copying them cost more than it saved)
            self.staging = {"axes": rows.kept + rows.reduced, "copies": {}, "bytes": 0}
        passes = len(self.plan.passes)
        for current in range(passes):
            self.across_pass(depth, rows, known, current)
            self.across_per_row(depth, rows, known, upto=current + 1, finished=rows.reductions_in[current],
                                outputs=outputs if current == passes - 1 else [])
        self.stage_inputs(stage_at, depth, rows)
        return self.lines[start:]

    def carried(self, rows, outputs: list[Value]) -> set[Value]:
        """Per-row values a later loop reads: those a pass's elementwise work reads, those a later
        per-row loop computes from, and outputs known before the last loop.  A per-row value
        is computed in the loop after pass ``level - 1`` (its level: reductions' included)."""
        last = len(self.plan.passes)
        per_row = {n.output for n in rows.members if n.output not in rows.full}
        carried = {v for v in per_row if v in outputs and rows.level[v] < last}
        for node in rows.members:
            for value in node.inputs:
                if value in per_row and (node.output in rows.full or rows.level[node.output] > rows.level[value]):
                    carried.add(value)
        return carried

    def positions(self, depth: int, rows) -> int:
        """The loop over the row position ``t`` with the reduced axes' indices (a window of
        several axes: a loop over each, ``t`` counted in C order); the depth inside."""
        if len(rows.reduced) == 1:
            self.emit(depth, "for t in range(ninner):")
            self.emit(depth + 1, f"i{rows.reduced[0]} = t")
            return depth + 1
        for level, axis in enumerate(rows.reduced):
            self.emit(depth + level, f"for i{axis} in range(n{axis}):")
        position = f"i{rows.reduced[0]}"
        for axis in rows.reduced[1:]:
            position = f"({position}) * n{axis} + i{axis}"
        self.emit(depth + len(rows.reduced), f"t = {position}")
        return depth + len(rows.reduced)

    def load(self, value: Value, embedding: tuple) -> str:
        """An input read along a row and across the block's rows reads the block's staged copy
        (stage_inputs); anything else as KernelWriter reads it."""
        staging = getattr(self, "staging", None)
        key = (value, embedding)
        if staging is None or key not in staging["copies"] and not self.copies_input(staging, value, embedding):
            return super().load(value, embedding)
        if key not in staging["copies"]:
            staging["copies"][key] = f"st{len(staging['copies'])}_{self.argument[value]}"
            staging["bytes"] += self.copy_bytes(value)
        return f"{staging['copies'][key]}[t * {BLOCK} + r]"

    def copies_input(self, staging: dict, value: Value, embedding: tuple) -> bool:
        """Whether to read this load of an input from a block copy: the input runs along every
        kept axis (other blocks do not read it alike) and along the row innermost (read in
        place, the block's rows are a row apart; with the row outside, they are adjacent
        already), and the block's copies stay within ``STAGE_BYTES`` of stack."""
        return (value in self.outer_of and not uniform_view(self.outer_of[value])
                and set(staging["axes"]) <= set(embedding) and embedding[-1] == staging["axes"][-1]
                and staging["bytes"] + self.copy_bytes(value) <= STAGE_BYTES)

    def copy_bytes(self, value: Value) -> int:
        return self.row_length() * BLOCK * compute_dtype(value.dtype).itemsize

    def stage_inputs(self, at: int, depth: int, rows) -> None:
        """At line ``at`` (the block's start): copy each input read along rows and across them
        into a block buffer, position-major, the block's rows outside and each row's elements
        inside, so its reads follow the input's memory.  Read where it is used, consecutive rows
        are a row's length apart, and each vector of them was a gather (a log-sum-exp over rows
        of 16 float32: 36.5 ms on one thread against 7.2 reading a copy laid out position-major)."""
        if self.staging is None:
            return
        copies, self.staging = self.staging["copies"], None
        mark = len(self.lines)
        for (value, embedding), name in copies.items():
            self.emit(depth, f"{name} = fj.stack_array({constructor(compute_dtype(value.dtype))}, "
                             f"{self.row_length() * BLOCK})")
            self.emit(depth, "for r in range(count):")
            self.emit(depth + 1, f"i{rows.kept[-1]} = low + r")
            inner = self.positions(depth + 1, rows)
            self.emit(inner, f"{name}[t * {BLOCK} + r] = {self.load(value, embedding)}")
        staged = self.lines[mark:]
        del self.lines[mark:]
        self.lines[at:at] = staged

    def across_rows_loop(self, depth: int, rows, known: list[Value]) -> int:
        """``for r``, the row's kept index, and the per-row values known so far that later loops
        read; the depth inside."""
        self.emit(depth, "for r in range(count):")
        self.emit(depth + 1, f"i{rows.kept[-1]} = low + r")
        for value in known:
            if value in rows.carried:
                self.emit(depth + 1, f"{self.var(value)} = p_{_identifier(value)}[r]")
        return depth + 1

    def across_per_row(self, depth: int, rows, known: list[Value], upto: int, finished: list[Node],
                       outputs: list[Value]) -> None:
        """One loop over the block's rows: the totals of the ``finished`` reductions, the per-row
        values known after pass ``upto - 1``, and (the last) the kernel's outputs stored."""
        done = set(known)
        new = [n for n in rows.members if n.output not in rows.full and n.output not in done
               and (n in finished if n.op.kind is OpKind.REDUCTION else rows.level[n.output] <= upto)]
        if not new and not outputs:
            return
        inner = self.across_rows_loop(depth, rows, known)
        for node in new:
            if node.op.kind is OpKind.REDUCTION:
                total = f"acc_{_identifier(node.output)}[r]"
                self.emit(inner, f"{self.var(node.output)} = {self.reduction_result(node, total)}")
            else:
                self.compute(inner, node)
            if node.output in rows.carried:
                self.emit(inner, f"p_{_identifier(node.output)}[r] = {self.var(node.output)}")
            known.append(node.output)
        for value in outputs:
            self.store(inner, value)

    def across_pass(self, depth: int, rows, known: list[Value], current: int) -> None:
        """Pass ``current``: each reduction's accumulators, then the row position outside the
        block's rows, the pass's elementwise work and its accumulations inside."""
        reductions = rows.reductions_in[current]
        wanted, available, todo = self.pass_values(rows, current)
        rules = {node: self.reduction_rule(node) for node in reductions}
        for node, (dtype, start, _) in rules.items():
            self.comment(depth, node)
            self.emit(depth, f"acc_{_identifier(node.output)} = fj.stack_array({constructor(dtype)}, {BLOCK})")
        self.emit(depth, "for r in range(count):")
        for node, (_, start, _) in rules.items():
            self.emit(depth + 1, f"acc_{_identifier(node.output)}[r] = {start}")
        inner = self.across_rows_loop(self.positions(depth, rows), rows, known)
        self.pass_body(rows, sorted(todo, key=rows.order.__getitem__), wanted, available, [], inner)
        for node, (dtype, _, combine) in rules.items():
            source = node.inputs[0]
            element = self.names.get(source) or self.load(source, _identity(source.shape))
            self.emit(inner, f"x = {cast(element, source.dtype, dtype)}")
            target = f"acc_{_identifier(node.output)}[r]"
            self.emit(inner, f"{target} = {combine(target, 'x')}")
        self.names = {k: v for k, v in self.names.items() if k not in rows.full}
