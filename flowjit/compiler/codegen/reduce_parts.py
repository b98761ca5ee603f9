"""Reductions of the whole domain in parts: the part of reduce.ReduceWriter that splits one
long reduction into parallel parts with partial totals, combined in order after (so the
result does not depend on the threads), and finds an arg-reduction's first position.
"""

from __future__ import annotations

from flowjit.compiler.codegen.writer import _identifier, split_index
from flowjit.compiler.ir.graph import Node
from flowjit.compiler.ir.ops.lowering import cast, constructor
from flowjit.compiler.ir.ops.reduction import ARG_REDUCTIONS, accumulator_dtype

PARTS, PART_MIN = 64, 1 << 16   # a whole-domain reduction: at most 64 parts, of 64K elements at least


class PartsWriter:
    """Methods of reduce.ReduceWriter (a KernelWriter): reduce_loop, reduction_rule and
    reduction_result come from it."""

    def reduce_in_parts(self, depth: int, nodes: list[Node], element, body, axis: int) -> None:
        """A reduction of the whole domain, one row: ``PARTS`` at most, of ``PART_MIN``
        elements at least, reduce in parallel into partial totals, combined in order after
        (how many depends on the size alone, so the result does not depend on the threads).
        Each part reads its stretch through slices indexed from 0 (see write_columns)."""
        inner = self.open_parts(depth, nodes)
        self.part_bounds(inner, "part")
        slices_at = len(self.lines)
        self.slicing, self.slice_index, self.slices = axis, "t", {}
        self.reduce_loop(inner, nodes, element, body, length="(high - low)",       # (a part: PART_MIN or all)
                         least=min(self.row_length(), PART_MIN), finish=False)
        self.slicing = None
        self.insert_slices(slices_at, inner)
        for node in nodes:
            self.emit(inner, f"partials_{_identifier(node.output)}[part] = total_{_identifier(node.output)}")
        self.combine_partials(depth, nodes, element, body, axis)

    def reduce_rows_in_parts(self, depth: int, nodes: list[Node], element, body, reduced: list[int]) -> None:
        """A reduction of the whole domain over several axes (a stencil's strided interior,
        which no reshape makes one row): parts of whole rows of the last axis, in parallel,
        each row reduced in lanes and added into its part's totals in order; the partials
        combined in order after.  Rows are read through slices from 0, so a row position is
        the row's own index and the pass may store full-shaped values (every row is one
        part's)."""
        last, outer = reduced[-1], reduced[:-1]
        self.emit(depth, f"nrows = {' * '.join(f'n{axis}' for axis in outer)}")
        inner = self.open_parts(depth, nodes)
        for node in nodes:
            self.emit(inner, f"part_{_identifier(node.output)} = {self.reduction_rule(node)[1]}")
        self.emit(inner, "for row in range(part * nrows // nparts, (part + 1) * nrows // nparts):")
        self.lines.extend(split_index(inner + 1, "row", outer))
        self.emit(inner + 1, "low = 0")
        self.emit(inner + 1, f"high = n{last}")
        slices_at = len(self.lines)
        self.slicing, self.slice_index, self.slices = last, "t", {}
        self.reduce_loop(inner + 1, nodes, element, body, length=f"n{last}", least=self.domain[last], finish=False)
        self.slicing = None
        self.insert_slices(slices_at, inner + 1)
        for node in nodes:
            name = _identifier(node.output)
            self.emit(inner + 1, f"part_{name} = {self.reduction_rule(node)[2](f'part_{name}', f'total_{name}')}")
        for node in nodes:
            self.emit(inner, f"partials_{_identifier(node.output)}[part] = part_{_identifier(node.output)}")
        self.combine_partials(depth, nodes, element, body, last)

    def open_parts(self, depth: int, nodes: list[Node]) -> int:
        """How many parts, each reduction's partial totals, and the parallel loop over the
        parts (whose body's depth this returns)."""
        self.emit(depth, f"nparts = max(1, min({PARTS}, ninner // {PART_MIN}))")
        for node in nodes:
            dtype = accumulator_dtype(node)
            self.emit(depth, f"partials_{_identifier(node.output)} = fj.heap_array({constructor(dtype)}, nparts)")
        self.emit(depth, self.for_loop("part", "nparts", outer=True))
        return depth + 1

    def combine_partials(self, depth: int, nodes: list[Node], element, body, axis: int) -> None:
        """Each reduction's value from its ``partials_<name>``, combined in order."""
        for node in nodes:
            _, start, combine = self.reduction_rule(node)
            total = "total_" + _identifier(node.output)
            self.emit(depth, f"{total} = {start}")
            self.emit(depth, "for part in range(nparts):")
            self.emit(depth + 1, f"{total} = {combine(total, f'partials_{_identifier(node.output)}[part]')}")
            if node.op in ARG_REDUCTIONS:
                self.first_position_in_parts(depth, node, element, body, axis, total)
            else:
                self.emit(depth, f"{self.var(node.output)} = {self.reduction_result(node, total)}")

    def part_bounds(self, depth: int, part: str) -> None:
        """``low`` and ``high``: where part number ``part`` of ``nparts`` starts and ends."""
        self.emit(depth, f"low = {part} * ninner // nparts")
        self.emit(depth, f"high = ({part} + 1) * ninner // nparts")

    def first_position_in_parts(self, depth: int, node: Node, element, body, axis: int, best: str) -> None:
        """argmax/argmin in parts, once the extreme ``best`` is known: the first part whose
        own extreme is ``best`` holds its first occurrence (numpy's answer), so only that
        part is read again, up to the position."""
        partials = "partials_" + _identifier(node.output)
        dtype = accumulator_dtype(node)
        nan_rule = (lambda x: f" or ({x} != {x} and {best} != {best})") if dtype.kind == "f" else (lambda x: "")
        self.emit(depth, "found = 0")
        self.emit(depth, "for part in range(nparts):")
        self.emit(depth + 1, f"if {partials}[part] == {best}{nan_rule(f'{partials}[part]')}:")
        self.emit(depth + 2, "found = part")
        self.emit(depth + 2, "break")
        self.part_bounds(depth, "found")
        slices_at = len(self.lines)
        self.slicing, self.slice_index, self.slices = axis, "t", {}
        self.emit(depth, "best_index = low")
        self.emit(depth, "for t in range(high - low):")
        if body is not None:
            body(depth + 1)
        self.emit(depth + 1, f"x = {cast(element(node), node.inputs[0].dtype, dtype)}")
        self.emit(depth + 1, f"if x == {best}{nan_rule('x')}:")
        self.emit(depth + 2, "best_index = low + t")
        self.emit(depth + 2, "break")
        self.slicing = None
        self.insert_slices(slices_at, depth)
        self.emit(depth, f"{self.var(node.output)} = {constructor(node.output.dtype)}(best_index)")
