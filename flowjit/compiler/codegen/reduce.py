"""Reduce kernels: how a fused node with reductions becomes loops.

- Rows (the innermost axis reduced): loops over the kept axes outside, in parallel chunks
  of rows; per row, one pass per dependent reduction, each a loop that does the pass's
  elementwise work and accumulates its reductions in vectorised stack-array lanes
  (``reduce_loop``); argmax/argmin find the extreme that way, then its first position.
- The whole domain as one row: reduced in parallel parts (``reduce_in_parts``); over several
  axes that make no one row, in parts of whole rows (``reduce_rows_in_parts``; both in
  reduce_parts.py).
- Outer axes (the innermost axis kept): blocks of adjacent outputs, adding contiguous row
  stretches into them (``write_columns``).
- A matrix's short rows: blocks of rows reduced across them (``write_across``, in
  reduce_across.py).
Several trailing reduced axes reach here merged into one (collapse.py); a window across rows
(reduce_across.py) loops over each of its axes.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from flowjit.compiler.codegen.reduce_across import BLOCK, AcrossWriter
from flowjit.compiler.codegen.reduce_parts import PART_MIN, PARTS, PartsWriter  # noqa: F401  (tests read them here)
from flowjit.compiler.codegen.scalar import CodegenError
from flowjit.compiler.codegen.writer import Block, KernelWriter, _identifier, _identity, split_index
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Node, Value
from flowjit.compiler.ir.ops.base import OpKind
from flowjit.compiler.ir.ops.lowering import cast, constructor, literal
from flowjit.compiler.ir.ops.reduction import ARG_REDUCTIONS, accumulator_dtype, lane_dtype
from flowjit.compiler.ir.plan import ReduceStrategy
from flowjit.compiler.ir.reduce_rows import full_values, levels
from flowjit.compiler.ir.types import DYNAMIC, compute_dtype

ROW_CHUNK = 64                  # rows per parallel task in reduce kernels
PARALLEL_ROWS = 4 * ROW_CHUNK   # a first kept axis this long gives the parallel loop tasks enough
LANES = 64                      # independent accumulators in a reduction (a power of two)
WIDE_ROW = 2 * LANES            # rows at least this long use them
FOLDED = 16                     # lanes left after the vector fold (a divisor of LANES)
SHORT_LANES = FOLDED            # rows the traced shapes make shorter than WIDE_ROW: this many lanes (half under 32)
FLUSH_BLOCKS = 16               # float32 sum lanes pass into float64 ones after this many blocks
COLUMN_BLOCK = 1024             # adjacent outputs per task when reducing over outer axes
# A row position's index into scratch: in parts t counts from the part's start; across rows a
# block's scratch is position-major.
SCRATCH_POSITION = {ReduceStrategy.PARTS: "low + t", ReduceStrategy.ACROSS: f"t * {BLOCK} + r"}


@dataclass
class Rows:
    """A reduce kernel's row plan resolved to its body's values, and the rendering's state."""

    reduced: list[int]
    kept: list[int]
    members: list[Node]
    level: dict[Value, int]
    full: set[Value]
    reductions_in: list[list[Node]]
    stores_in: list[list[Value]]
    folded: set[Node]
    direct: set[Value]
    parts: bool
    scratch: set[Value]
    first: dict[Value, int]
    scratch_name: dict[Value, str]
    order: dict[Value, int]
    outer: int = 1                                     # the depth of the per-row code
    position: str = "t"                                # a row position's index into scratch
    carried: set[Value] = field(default_factory=set)   # (across rows: per-row values a later loop reads)
    computed_outer: set[Value] = field(default_factory=set)


class ReduceWriter(AcrossWriter, PartsWriter, KernelWriter):
    def write_body(self, outputs: list[Value]) -> list[str]:
        return self.write_reduce(outputs)

    def write_reduce(self, outputs: list[Value]) -> list[str]:
        """Loops over the kept axes outside; per row, one pass per dependent reduction.

        Each pass is one loop over the row that computes the pass's elementwise values,
        writes what later passes read into per-row scratch arrays, stores full-shaped
        outputs, and accumulates the pass's reductions in independent lanes (no serial
        dependency chain), so a value reduced is never written out to be read again.
        Reductions over several axes, argmax and argmin reduce a scratch row after the loop.
        Kernels that keep the innermost axis go to write_columns; a one-pass reduction of
        the whole domain runs in parts (reduce_in_parts).  What goes where is the plan's
        (passes/plan_reductions.py); this renders it.
        """
        start = len(self.lines)
        if self.plan.strategy is None:
            raise CodegenError(f"reduce kernel {self.name} has no row plan: run the plan-reductions pass first")
        rows = self.resolve_rows()
        if self.plan.strategy is ReduceStrategy.COLUMNS:
            return self.write_columns(outputs, rows.reduced, rows.kept, rows.members, rows.level)
        if self.plan.strategy is ReduceStrategy.ACROSS:
            return self.write_across(outputs, rows)
        self.open_rows(rows)
        self.compute_outer(rows, 0)
        for current in range(len(self.plan.passes)):
            self.write_pass(rows, current)
        for value in outputs:
            if value not in rows.full:
                self.store(rows.outer, value)
        return self.lines[start:]

    def resolve_rows(self) -> "Rows":
        """The plan's row decisions as the body's values and nodes."""
        plan = self.plan
        named = {v.name: v for v in self.body.inputs} | {v.name: v for n in self.body.nodes for v in n.outputs}
        reduced = sorted(set(self.axes))
        scratch = {named[name] for name in plan.scratch}
        return Rows(
            reduced=reduced, kept=[axis for axis in range(len(self.domain)) if axis not in reduced],
            members=[n for n in self.body.nodes if n.op is not ops.constant], level=levels(self.body)[0],
            full=full_values(self.body, plan),
            reductions_in=[[named[name].producer for name in row.reduce] for row in plan.passes],
            stores_in=[[named[name] for name in row.store] for row in plan.passes],
            folded={named[name].producer for row in plan.passes for name in row.fold},
            direct={named[name] for name in plan.direct}, parts=plan.strategy is ReduceStrategy.PARTS,
            scratch=scratch, first={named[name]: at for name, at in plan.scratch.items()},
            scratch_name={value: "s_" + _identifier(value) for value in scratch},
            order={node.output: index for index, node in enumerate(self.body.nodes)},
            position=SCRATCH_POSITION.get(plan.strategy, "t"))

    def open_rows(self, rows: "Rows") -> None:
        """Constants, the row length, scratch rows, and the loops over the kept axes: rows in
        chunks, the chunk loop in parallel, scratch rows allocated per chunk."""
        self.constants(1)
        self.emit(1, f"ninner = {' * '.join(f'n{axis}' for axis in rows.reduced) or '1'}")
        depth = 1
        allocations = [f"{rows.scratch_name[v]} = fj.heap_array({constructor(v.dtype)}, ninner)"
                       for v in sorted(rows.scratch, key=lambda v: rows.scratch_name[v])]
        if rows.kept and (len(rows.kept) == 1 or self.domain[rows.kept[0]] >= PARALLEL_ROWS):
            first_axis = rows.kept[0]
            self.emit(depth, self.for_loop("chunk", f"(n{first_axis} + {ROW_CHUNK - 1}) // {ROW_CHUNK}", outer=True))
            depth += 1
            for line in allocations:
                self.emit(depth, line)
            self.emit(depth, f"for i{first_axis} in range(chunk * {ROW_CHUNK}, "
                             f"min(n{first_axis}, (chunk + 1) * {ROW_CHUNK})):")
            depth += 1
            for axis in rows.kept[1:]:
                self.emit(depth, f"for i{axis} in range(n{axis}):")
                depth += 1
        elif rows.kept:
            # Several kept axes, the first too short to chunk (8 attention heads made one
            # parallel task, and the kernel serial): chunks of all their rows in C order, each
            # row's position taken apart once per row.
            self.emit(depth, f"nrows = {' * '.join(f'n{axis}' for axis in rows.kept)}")
            self.emit(depth, self.for_loop("chunk", f"(nrows + {ROW_CHUNK - 1}) // {ROW_CHUNK}", outer=True))
            depth += 1
            for line in allocations:
                self.emit(depth, line)
            self.emit(depth, f"for row in range(chunk * {ROW_CHUNK}, min(nrows, (chunk + 1) * {ROW_CHUNK})):")
            depth += 1
            self.lines.extend(split_index(depth, "row", rows.kept))
        else:
            # One row: the whole domain.  Its scratch is as large as the inputs, and a fresh
            # one on every call would fault its pages in again: the driver passes a buffer.
            self.scratch_parameters = [(rows.scratch_name[v], v.dtype)
                                       for v in sorted(rows.scratch, key=lambda v: rows.scratch_name[v])]
        rows.outer = depth

    def compute_outer(self, rows: "Rows", upto: int) -> None:
        """Per-row values (not along the reduced axes) known after pass ``upto``."""
        for node in rows.members:
            value = node.output
            if value in rows.full or node.op.kind is OpKind.REDUCTION or value in rows.computed_outer:
                continue
            if rows.level[value] <= upto:
                self.compute(rows.outer, node)
                rows.computed_outer.add(value)

    def pass_values(self, rows: "Rows", current: int) -> tuple[list, set, set]:
        """What pass ``current`` needs (reduction inputs, stores, scratch it writes first), what
        it reads back from scratch, and everything it computes or reads for them."""
        reductions, stores = rows.reductions_in[current], rows.stores_in[current]
        wanted = [n.inputs[0] for n in reductions if n.inputs[0] in rows.full] + stores
        wanted += [v for v in rows.scratch if rows.first.get(v) == current and v not in wanted]
        available = {v for v in rows.scratch if rows.first.get(v, current) < current}
        todo = set()
        stack = [v for v in wanted if v in rows.full]
        while stack:
            value = stack.pop()
            if value in todo:
                continue
            todo.add(value)
            if value not in available:
                stack.extend(v for v in value.producer.inputs if v in rows.full)
        return wanted, available, todo

    def write_pass(self, rows: "Rows", current: int) -> None:
        reductions, stores = rows.reductions_in[current], rows.stores_in[current]
        if not reductions and not stores:
            return
        in_loop = [n for n in reductions if n in rows.folded]
        after = [n for n in reductions if n not in rows.folded]
        wanted, available, todo = self.pass_values(rows, current)
        body = functools.partial(self.pass_body, rows, sorted(todo, key=rows.order.__getitem__), wanted,
                                 available, stores)
        element = functools.partial(self.row_element, rows)
        has_body = bool(todo or stores or set(wanted) & rows.scratch)
        single, outer = len(rows.reduced) == 1, rows.outer
        self.staged_body = self.body_stages(rows, todo, wanted, available, stores)
        if rows.parts and not single:
            self.reduce_rows_in_parts(outer, reductions, element, body if has_body else None, rows.reduced)
            after = []
        elif rows.parts:
            self.reduce_in_parts(outer, reductions, element, body if has_body else None, rows.reduced[0])
            after = []
        elif single and (in_loop or has_body):
            self.reduce_loop(outer, in_loop, element, body if has_body else None)
        elif not single and wanted:
            # Several reduced axes: one loop nest that writes scratch, indexed by a counter.
            self.emit(outer, "t = 0")
            depth = outer
            for axis in rows.reduced:
                self.emit(depth, f"for i{axis} in range(n{axis}):")
                depth += 1
            body(depth)
            self.emit(depth, "t += 1")
        self.staged_body = None
        self.names = {k: v for k, v in self.names.items() if k not in rows.full}
        for node in after:
            if node.op in ARG_REDUCTIONS:
                self.arg_reduce(outer, node, self.row_of(rows, node.inputs[0]))
            else:
                self.reduce_loop(outer, [node], lambda node: self.row_of(rows, node.inputs[0])("t"))
        self.compute_outer(rows, current + 1)

    def body_stages(self, rows: "Rows", todo: set, wanted: list, available: set, stores: list):
        """For a pass whose loop only computes what it reduces (no scratch, no stores) and needs
        stages (writer.stages: chained math routines, or one with a fast path), its nodes, their
        stages and the lines that index its loads: reduce_loop then runs each block of lanes in
        stages (``np.sin(np.exp(x)).sum()``)."""
        if stores or available or not todo or set(wanted) & rows.scratch or not (len(rows.reduced) == 1 or rows.parts):
            return None
        nodes = [value.producer for value in sorted(todo, key=rows.order.__getitem__)]
        stage = self.stages(nodes)
        return (nodes, stage, [f"i{rows.reduced[-1]} = t"]) if stage else None

    def pass_body(self, rows: "Rows", todo: list, wanted: list, available: set, stores: list, depth: int) -> None:
        """A pass's elementwise work at row position ``t`` (``i<axis>`` for one axis)."""
        # (across rows, the position loops set the reduced axes' indices)
        if (len(rows.reduced) == 1 or rows.parts) and todo and self.plan.strategy is not ReduceStrategy.ACROSS:
            self.emit(depth, f"i{rows.reduced[-1]} = t")
        at = rows.position
        for value in todo:
            if value in available:
                self.emit(depth, f"{self.var(value)} = {rows.scratch_name[value]}[{at}]")
            else:
                self.compute(depth, value.producer)
        for value in wanted:
            if value in rows.scratch and value not in available:
                source = self.names.get(value) or self.load(value, _identity(value.shape))
                self.emit(depth, f"{rows.scratch_name[value]}[{at}] = {source}")
        for value in stores:
            if self.slicing is None:
                self.store(depth, value)
            else:                   # (in parts of whole rows: through a slice, as the loads)
                self.emit(depth, f"{self.load(value, self.embed[value])} = {self.var(value)}")

    def row_element(self, rows: "Rows", node: Node) -> str:
        """What a reduction inside a pass's loop reduces at row position ``t``."""
        source = node.inputs[0]
        if source in self.names:
            return self.names[source]
        if source in rows.direct and self.slicing is None:
            return self.row_reader(source, rows.reduced[0])("t")
        return self.load(source, _identity(source.shape))       # (in parts: through a slice)

    def row_of(self, rows: "Rows", source: Value):
        """How a reduction after the loop reads its row: the input itself, or scratch."""
        if source in rows.direct:
            return self.row_reader(source, rows.reduced[0])
        return lambda index, name=rows.scratch_name[source]: f"{name}[{index}]"

    def write_columns(self, outputs: list[Value], reduced: list[int], kept: list[int], members: list[Node],
                      level: dict[Value, int]) -> list[str]:
        """Reductions over outer axes (the innermost axis is kept, as in ``x.sum(axis=0)``).

        Reading a column at a time would stride through memory, so the kernel runs over
        blocks of ``COLUMN_BLOCK`` adjacent outputs instead: for each, accumulators in a
        stack array, then every reduced position in order, adding a contiguous stretch of
        a row into them (the innermost loop vectorises across outputs), then the results
        and whatever the kernel computes from them.  float32 sums accumulate 16 rows in
        float32 at a time, then pass into float64 ones, as row reductions do.  Only for kernels whose reductions all
        read values known before any reduction (one pass); full-shaped outputs (the plan's
        stores, all computed before the reductions) are written in the same loop, through
        slices as the loads are.  The fuser keeps full-shaped consumers of such reductions
        out (fuse.py).
        """
        start = len(self.lines)
        last, depth = kept[-1], self.open_columns(reduced, kept)
        reductions = [n for n in members if n.op.kind is OpKind.REDUCTION]
        rules = {node: self.reduction_rule(node) for node in reductions}
        lane = {node: lane_dtype(node) for node in reductions}
        narrowed = [node for node in reductions if lane[node] != rules[node][0]]
        slot = {node: f"acc_{_identifier(node.output)}[c]" for node in reductions}
        wide = {node: f"wide_{_identifier(node.output)}[c]" for node in narrowed}
        for node, (dtype, first, _) in rules.items():
            self.comment(depth, node)
            # (only the block's outputs: a max-pool over 3 channels starting all 1024 slots per
            # pixel spent most of its time there)
            self.accumulators(depth, node, "acc_", lane[node], dtype, first, COLUMN_BLOCK, used="high - low")
        if narrowed:
            self.emit(depth, "position = 0")
        inner = depth
        for axis in reduced:
            self.emit(inner, f"for i{axis} in range(n{axis}):")
            inner += 1
        # The innermost loop counts c from 0 and reads rows through slices taken before it:
        # numba then knows no index is negative.  (``i = low + c`` indexing, with ``low``
        # from the parallel scheduler, kept a wraparound select that LLVM made a gather.)
        slices_at = len(self.lines)
        self.emit(inner, "for c in range(high - low):")
        self.emit(inner + 1, f"i{last} = low + c")
        self.slicing, self.slice_index, self.slices = last, "c", {}
        for node in members:
            if node.op.kind is not OpKind.REDUCTION and level[node.output] == 0:
                self.compute(inner + 1, node)
        for node, (dtype, _, combine) in rules.items():
            source = node.inputs[0]
            element = self.names.get(source) or self.load(source, _identity(source.shape))
            self.emit(inner + 1, f"x = {cast(element, source.dtype, lane[node])}")
            self.emit(inner + 1, f"{slot[node]} = {combine(slot[node], 'x')}")
        stored = [value for value in outputs if value.name in self.plan.passes[0].store]
        for value in stored:                  # full-shaped outputs, through slices as the loads
            self.emit(inner + 1, f"{self.load(value, self.embed[value])} = {self.var(value)}")
        self.slicing = None
        self.insert_slices(slices_at, inner)
        if narrowed:
            # float32 sums add FLUSH_BLOCKS rows in float32, then pass into float64 (lane_dtype).
            self.emit(inner, "position += 1")
            self.emit(inner, f"if position % {FLUSH_BLOCKS} == 0:")
            self.emit(inner + 1, "for c in range(high - low):")
            for node in narrowed:
                dtype, _, combine = rules[node]
                self.emit(inner + 2, f"{wide[node]} = {combine(wide[node], cast(slot[node], lane[node], dtype))}")
                self.emit(inner + 2, f"{slot[node]} = {literal(0, lane[node])}")
        for node in members:                  # computed per element above; per output below
            self.names.pop(node.output, None)
        self.emit(depth, "for c in range(high - low):")
        self.emit(depth + 1, f"i{last} = low + c")
        for node in members:
            if node.op.kind is OpKind.REDUCTION:
                total = slot[node]
                if node in narrowed:
                    dtype, _, combine = rules[node]
                    total = combine(wide[node], cast(slot[node], lane[node], dtype))
                self.emit(depth + 1, f"{self.var(node.output)} = {self.reduction_result(node, total)}")
            elif not any(e in reduced for e in self.embed[node.output] if e is not None):
                self.compute(depth + 1, node)
        for value in outputs:
            if value not in stored:
                self.store(depth + 1, value)
        return self.lines[start:]

    def open_columns(self, reduced: list[int], kept: list[int]) -> int:
        """Constants, the row count, loops over the kept axes but the last, and the (parallel)
        loop over its blocks of ``COLUMN_BLOCK`` outputs, ``low`` to ``high``; the depth inside."""
        self.constants(1)
        self.emit(1, "ninner = " + " * ".join(f"n{axis}" for axis in reduced))
        last, depth = kept[-1], 1
        for index, axis in enumerate(kept[:-1]):
            self.emit(depth, self.for_loop(f"i{axis}", f"n{axis}", outer=index == 0))
            depth += 1
        width = str(COLUMN_BLOCK)
        if self.parallel and not kept[:-1]:
            # Blocks narrow enough that every thread gets one (a column sum of 1024 outputs was one
            # block, one thread); each output still adds its rows in order, so the bits stay the same.
            width = "width"
            self.emit(depth, f"width = fj.column_block(n{last}, {COLUMN_BLOCK})")
        self.emit(depth, self.for_loop("block", f"(n{last} + {width} - 1) // {width}", outer=not kept[:-1]))
        depth += 1
        self.emit(depth, f"low = block * {width}")
        self.emit(depth, f"high = min(n{last}, low + {width})")
        return depth

    def accumulators(self, depth: int, node: Node, prefix: str, lane: np.dtype, dtype: np.dtype, start: str,
                     size: int, used: str | None = None) -> None:
        """``size`` accumulators for ``node`` in a stack array, ``<prefix><name>``, in the lane
        dtype; where that is narrower than the accumulator dtype, also ``wide_<name>`` that
        the lanes flush into.  The first ``used`` of them (all by default) start at the
        reduction's start value."""
        arrays = [(prefix, lane)] + ([("wide_", dtype)] if lane != dtype else [])
        name = _identifier(node.output)
        for array_prefix, array_dtype in arrays:
            self.emit(depth, f"{array_prefix}{name} = fj.stack_array({constructor(array_dtype)}, {size})")
        self.emit(depth, f"for j in range({used or size}):")
        for array_prefix, array_dtype in arrays:
            value = start if array_dtype == dtype else literal(0, array_dtype)
            self.emit(depth + 1, f"{array_prefix}{name}[j] = {value}")

    def row_reader(self, value: Value, axis: int):
        """Index expressions into an input along the reduced ``axis`` (the row position)."""
        embedding = _identity(value.shape)
        array = self.argument[value]
        self.note_extent(array, embedding, value.shape, pitched=value in self.pitched)

        def read(index: str) -> str:
            if value in self.pitched:
                return f"{array}[np.uint64({self.pitched_index(array, embedding, {axis: f'({index})'})})]"
            parts = [index if entry == axis else ("0" if entry is None else f"i{entry}") for entry in embedding]
            return f"{array}[{', '.join(parts)}]"
        return read

    def arg_reduce(self, depth: int, node: Node, row) -> None:
        """argmax/argmin of a row (``row(index)`` reads element ``index``): the extreme value
        through vectorised lanes (NaN sticky, as numpy's comparison makes NaN win), then its
        first position: blocks of ``LANES`` are tested whole (a loop LLVM vectorises) up to
        the first that holds it, and only that block, or the tail, is searched one by one."""
        self.reduce_loop(depth, [node], lambda node: row("t"))
        best = "total_" + _identifier(node.output)
        floating = compute_dtype(node.inputs[0].dtype).kind == "f"
        holds = f"(x == {best})" + (f" | ((x != x) & ({best} != {best}))" if floating else "")
        self.emit(depth, "first = ninner - ninner % " + str(LANES))
        self.emit(depth, f"for block in range(ninner // {LANES}):")
        self.emit(depth + 1, "hit = False")
        self.emit(depth + 1, f"for j in range({LANES}):")
        self.emit(depth + 2, f"x = {row(f'block * {LANES} + j')}")
        self.emit(depth + 2, f"hit = hit | {holds}")
        self.emit(depth + 1, "if hit:")
        self.emit(depth + 2, f"first = block * {LANES}")
        self.emit(depth + 2, "break")
        self.emit(depth, "best_index = 0")
        self.emit(depth, "for t in range(first, ninner):")
        self.emit(depth + 1, f"x = {row('t')}")
        self.emit(depth + 1, f"if {holds}:")
        self.emit(depth + 2, "best_index = t")
        self.emit(depth + 2, "break")
        self.emit(depth, f"{self.var(node.output)} = {constructor(node.output.dtype)}(best_index)")

    def reduce_loop(self, depth: int, nodes: list[Node], element, body=None, length: str = "ninner",
                    least: int | None = None, finish: bool = True) -> None:
        """One loop over the row position ``t`` that runs ``body(depth)`` (a pass's
        elementwise work, when there is any) and reduces each node's input, read by
        ``element(node)`` once the body has run.  The row has ``length`` elements, at least
        ``least`` (by the traced shapes; default ``row_length()``); without ``finish`` the totals
        are left in ``total_<name>`` for the caller.

        Rows of at least ``WIDE_ROW`` elements go through ``LANES`` independent accumulators
        per reduction in a stack array: the lane loop carries no dependency from one element
        to the next, so LLVM vectorises it without reassociating anything.  At the end of
        the row a vector fold leaves ``FOLDED`` lanes, combined one by one (a full tree
        scalarised into ~250 instructions a row).  The last ``ninner % LANES`` elements go
        through the lanes too, as one more block over the row's last ``LANES`` elements whose
        lanes before them (counted already) take the reduction's start value: the body runs
        there again and stores what it stored before (a REDUCE kernel writes no buffer it
        reads), and the pass stays one vectorised loop (a scalar loop over the rest cost a
        row of 1000 float32 ``exp`` about a third of its time).  A row that can be shorter
        than its lanes (``least``) is one scalar loop instead.  A row the traced shapes make
        shorter than ``WIDE_ROW`` has ``SHORT_LANES`` lanes from twice that length (a softmax
        over 64 classes: one dependent step per 16 elements, not per element), half as many
        from 16 elements, and shorter ones one scalar loop only: the lane loops would never
        run, and they are most of what numba would compile (a softmax over 10 classes).  A
        kernel is written for the shapes it runs on (``Lowered.compile`` checks them; a
        session binds a ``None`` dimension first), so a dynamic one is an error here.
        """
        if any(self.domain[axis] == DYNAMIC for axis in self.axes):
            raise CodegenError("a reduction's row length is unknown when its kernel is written: bind the dynamic "
                               "dimensions first")
        least = self.row_length() if least is None else least
        rules = {node: self.reduction_rule(node) for node in nodes}
        lane = {node: lane_dtype(node) for node in nodes}
        narrowed = [node for node in nodes if lane[node] != rules[node][0]]
        for node, (_, start, _) in rules.items():
            self.comment(depth, node)
            self.emit(depth, f"total_{_identifier(node.output)} = {start}")

        def visit(depth: int, combine_into, in_lanes: bool, computed: bool = False, valid: str | None = None) -> None:
            """The element's work and its reductions; where ``valid`` is false, each reduction
            takes its start value (in the lane dtype) instead of the element."""
            if body is not None and not computed:
                body(depth)
            for node, (dtype, start, combine) in rules.items():
                into = lane[node] if in_lanes else dtype
                x = cast(element(node), node.inputs[0].dtype, into)
                if valid is not None:
                    x = f"{x} if {valid} else {start if into == dtype else literal(0, into)}"
                self.emit(depth, f"x = {x}")
                target = combine_into(node)
                self.emit(depth, f"{target} = {combine(target, 'x')}")

        def lane_block(depth: int, position: str, valid: str | None = None) -> None:
            """One block of ``lanes`` elements into the lanes, element ``j`` of it at ``position``."""
            into = lambda node: f"lanes_{_identifier(node.output)}[j]"           # noqa: E731
            if body is not None and self.staged_body is not None:
                nodes_in_body, stage, index = self.staged_body
                finish = functools.partial(visit, combine_into=into, in_lanes=True, computed=True, valid=valid)
                self.staged_block(depth, nodes_in_body, stage, Block(
                    str(lanes), lanes, [f"t = {position}"] + index, finish, tuple(node.inputs[0] for node in nodes)))
            else:
                self.emit(depth, f"for j in range({lanes}):")
                self.emit(depth + 1, f"t = {position}")
                visit(depth + 1, into, in_lanes=True, valid=valid)

        short = length == "ninner" and self.row_length() < WIDE_ROW
        lanes = (SHORT_LANES if self.row_length() >= 2 * SHORT_LANES else SHORT_LANES // 2) if short else LANES

        def flush(depth: int) -> None:
            """Add the narrow lanes into the wide ones."""
            for node in narrowed:
                dtype, _, combine = rules[node]
                narrow, wide = "lanes_" + _identifier(node.output), "wide_" + _identifier(node.output)
                self.emit(depth, f"for j in range({lanes}):")
                self.emit(depth + 1, f"{wide}[j] = {combine(f'{wide}[j]', cast(f'{narrow}[j]', lane[node], dtype))}")
                self.emit(depth + 1, f"{narrow}[j] = {literal(0, lane[node])}")

        if nodes and not (short and self.row_length() < 2 * lanes) and least >= lanes:
            for node, (dtype, start, _) in rules.items():
                self.accumulators(depth, node, "lanes_", lane[node], dtype, start, lanes)
            self.emit(depth, f"for block in range({length} // {lanes}):")
            lane_block(depth + 1, f"block * {lanes} + j")
            if narrowed:
                self.emit(depth + 1, f"if block % {FLUSH_BLOCKS} == {FLUSH_BLOCKS - 1}:")
                flush(depth + 2)
            self.emit(depth, f"tail = {length} - {length} % {lanes}")
            self.emit(depth, f"if tail < {length}:")              # (at most FLUSH_BLOCKS blocks since a flush)
            # (max: LLVM then knows the positions are not negative, so no wraparound makes them gathers)
            self.emit(depth + 1, f"last = max({length} - {lanes}, 0)")
            lane_block(depth + 1, "last + j", valid="last + j >= tail")
            if narrowed:
                flush(depth)
            for node, (_, _, combine) in rules.items():
                self.fold_lanes(depth, ("wide_" if node in narrowed else "lanes_") + _identifier(node.output),
                                "total_" + _identifier(node.output), combine, lanes)
        else:
            self.emit(depth, f"for t in range({length}):")
            visit(depth + 1, lambda node: f"total_{_identifier(node.output)}", in_lanes=False)
        for node in nodes if finish else ():
            if node.op not in ARG_REDUCTIONS:         # arg_reduce finds the position
                self.emit(depth, f"{self.var(node.output)} = "
                                 f"{self.reduction_result(node, 'total_' + _identifier(node.output))}")

    def fold_lanes(self, depth: int, acc: str, total: str, combine, lanes: int) -> None:
        """``lanes`` accumulators ``acc`` into ``total``: folded to one vector's worth
        (``FOLDED``) with vector operations, then one by one."""
        if lanes > FOLDED:
            self.emit(depth, f"for j in range({FOLDED}):")
            self.emit(depth + 1, f"for group in range(1, {lanes // FOLDED}):")
            self.emit(depth + 2, f"x = {acc}[j + group * {FOLDED}]")
            self.emit(depth + 2, f"{acc}[j] = {combine(f'{acc}[j]', 'x')}")
        self.emit(depth, f"for j in range({min(FOLDED, lanes)}):")
        self.emit(depth + 1, f"{total} = {combine(total, f'{acc}[j]')}")

    def row_length(self) -> int:
        """``ninner`` as the traced shapes give it."""
        return math.prod(self.domain[axis] for axis in set(self.axes))

    def reduction_result(self, node: Node, total: str) -> str:
        """The reduction's value from its accumulated ``total`` (a mean divides by ``ninner``)."""
        if node.op is ops.mean:
            if accumulator_dtype(node).kind == "c":      # (numba's complex / raises on a zero count)
                return cast(f"fj.complex_divide_c128({total}, np.complex128(ninner))", np.dtype(np.complex128),
                            node.output.dtype)
            return cast(f"({total} / np.float64(ninner))", np.dtype(np.float64), node.output.dtype)
        return cast(total, accumulator_dtype(node), node.output.dtype)

    def reduction_rule(self, node: Node):
        """(accumulator dtype, start literal, combine(a, b) -> expression) of a reduction: the
        op's own rule (``Op.combine``, next to its definition) at its accumulator dtype."""
        if node.op.combine is None:
            raise CodegenError(f"reduction '{node.op.name}' (%{node.name}) has no kernel rule: run the "
                               f"expand-composites pass first")
        dtype = accumulator_dtype(node)
        start, combine = node.op.combine(dtype)
        return dtype, start, combine
