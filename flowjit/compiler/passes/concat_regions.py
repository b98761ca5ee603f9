"""concat-regions: elementwise work over a concatenation runs once per region of its pieces.

``np.roll(u, 1) - 2 * u + np.roll(u, -1)``: ``np.roll``, ``np.concatenate``, ``np.stack`` and
``np.pad`` build their result as a ``concat`` of pieces, which runs outside kernels, so an
elementwise consumer reads the joined array back and nothing fuses across the join.  This
pass moves the join after the elementwise work.  XLA fuses a concatenate into its consumer
with a select per element; here the consumer's domain is cut at the pieces' boundaries along
the joined axis (the union over its operands), the consumer runs on each region with each
operand's part of it, and the regions' results are joined.  The driver then writes each
region's kernel straight into its slice of the result.

Two rules make the regions' operands plain values again:

- a slice of a slice is one slice; a slice of a concat is the pieces it covers, each sliced;
  a slice of a broadcast is the broadcast of the source's part;
- a slice of an elementwise value that is read only through slices (once its readers are
  split) is the same op on slices of its operands, so the value is computed per region in
  the region's kernel.  Where slices overlap (``2 * u`` read by two ``np.roll`` regions and
  in full) elements are computed more than once: up to RECOMPUTE times for cheap arithmetic,
  never for a math routine (exp, log, ...), whose value is then written once and sliced.

A node is cut into at most MAX_REGIONS regions, and only along the axes of a 1-D or 2-D result
(MAX_RANK): a concat of many pieces (``np.stack`` of 100 arrays) stays materialised and is
read as one array.  Only joins of pieces that compute nothing (inputs, constants and views of
them) are cut at, and the joins this pass makes: an iterated stencil's previous step (a join
of computed values) is read whole, or each step would cut the regions of the last one again;
and the graph may grow at most ``growth`` times (plus SLACK) in a pipeline run.  Negative
steps along a joined axis are left as slices of the joined array.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node, Value
from flowjit.compiler.ir.ops.base import OpKind, inlines_math
from flowjit.compiler.ir.ops.shape import slice_length
from flowjit.compiler.passes.base import Pass, Rewriter, kept_nodes, plain

MAX_REGIONS = 4
RECOMPUTE = 3.0          # how many times a cheap elementwise value may be computed per element
NESTED = 2               # regions within regions (a concat along another axis inside a region)
SLACK = 64               # nodes the graph may grow by beyond ``growth`` times its size
# Cuts in 1-D and 2-D results only.  A 3-D stencil over np.pad cut into 27 regions ran 15 ms
# against 10 ms reading the padded copy: its faces along the last axis are slabs one element
# wide, read with a stride of a whole row.
MAX_RANK = 2
VIEWS = (ops.slice, ops.reshape, ops.broadcast_to, ops.transpose, ops.concat)

Window = tuple[tuple[int, int, int], ...]        # (start, stop, step) per axis, as slice's attrs


def _elementwise(node: Node) -> bool:
    return node.op.kind is OpKind.ELEMENTWISE and plain(node) and not node.output.type.dynamic


def _window_of(node: Node) -> Window:
    return tuple(zip(node.attrs["starts"], node.attrs["stops"], node.attrs["steps"]))


def _whole(shape) -> Window:
    return tuple((0, dim, 1) for dim in shape)


def _length(span) -> int:
    return slice_length(*span)


def _compose(inner: tuple[int, int, int], outer: tuple[int, int, int]) -> tuple[int, int, int]:
    """The span of the source that ``outer`` takes of what ``inner`` took."""
    count = _length(outer)
    if count == 0:
        return (0, 0, 1)
    step = inner[2] * outer[2]
    start = inner[0] + inner[2] * outer[0]
    stop = start + step * (count - 1) + (1 if step > 0 else -1)
    return (start, max(stop, -1), step)


def _operand_window(operand: Value, shape, window: Window) -> Window:
    """The part of ``operand`` that the part ``window`` of a result of ``shape`` reads, with
    numpy's broadcasting: an axis the operand broadcasts along is read whole."""
    lead = len(shape) - operand.type.rank
    return tuple(span if dim == shape[lead + axis] else (0, dim, 1)
                 for axis, (dim, span) in enumerate(zip(operand.shape, window[lead:])))


class _Regions:
    """One sweep's rewriting: ``part`` takes a window of a value, ``apply`` runs an elementwise
    op on values, cut into regions where an operand is a concat."""

    def __init__(self, rw: Rewriter, created: set[Value], recomputed: frozenset[Node] = frozenset()):
        self.rw = rw
        self.created = created              # the joins this sweep made, which later cuts may cut at
        self.recomputed = recomputed        # elementwise nodes computed per slice of them

    def join(self, pieces: list[Value], axis: int, counts: bool = True) -> Value:
        joined = self.rw.emit(ops.concat, pieces, {"axis": axis})
        if counts:
            self.created.add(joined)
        return joined

    def part(self, value: Value, window: Window) -> Value:
        if window == _whole(value.shape):
            return value
        producer = value.producer
        if producer is not None and plain(producer):
            if producer.op is ops.slice:
                source = producer.inputs[0]
                return self.part(source, tuple(_compose(inner, outer)
                                               for inner, outer in zip(_window_of(producer), window)))
            if producer.op is ops.concat and _counts(value, self.created):
                joined = self.part_of_concat(producer, window)
                if joined is not None:
                    return joined
            if producer.op is ops.broadcast_to:
                source = producer.inputs[0]
                shape = [_length(span) for span in window]
                return self.rw.emit(ops.broadcast_to, [self.part(source, _operand_window(source, value.shape, window))],
                                    {"shape": shape})
            if producer in self.recomputed:
                return self.apply(producer.op, [self.part(operand, _operand_window(operand, value.shape, window))
                                                for operand in producer.inputs], producer.attrs, like=producer)
        return self.rw.emit(ops.slice, [value], {"starts": [s for s, _, _ in window],
                                                  "stops": [e for _, e, _ in window],
                                                  "steps": [t for _, _, t in window]})

    def part_of_concat(self, node: Node, window: Window) -> Value | None:
        """The pieces of ``node``'s concat that ``window`` covers, each sliced (None for a
        negative step along the joined axis)."""
        axis = node.attrs["axis"]
        start, _, step = window[axis]
        count = _length(window[axis])
        if step < 0 or count == 0:
            return None
        pieces, offset = [], 0
        for piece in node.inputs:
            extent = piece.shape[axis]
            first = max(0, -(-(offset - start) // step))               # ceil((offset - start) / step)
            last = min(count - 1, (offset + extent - 1 - start) // step)
            if first <= last:
                span = (start + step * first - offset, start + step * last - offset + 1, step)
                taken = self.part(piece, window[:axis] + (span,) + window[axis + 1:])
                if taken.dtype != node.output.dtype:
                    taken = self.rw.emit(ops.cast, [taken], {"dtype": node.output.dtype})
                pieces.append(taken)
            offset += extent
        return pieces[0] if len(pieces) == 1 else self.join(pieces, axis, node.output in self.created)

    def apply(self, op, operands: list[Value], attrs: dict, *, like: Node | None = None, depth: int = 0) -> Value:
        """``op`` on ``operands``: one node, or one per region joined when an operand is a concat."""
        shape = op.infer_types([v.type for v in operands], op.normalize_attrs(dict(attrs)))[0].shape
        cut = regions(operands, shape, self.created) if depth < NESTED else None
        if cut is None:
            return self.rw.emit(op, operands, attrs, like=like)
        axis, bounds = cut
        results = []
        for low, high in bounds:
            window = _whole(shape)[:axis] + ((low, high, 1),) + _whole(shape)[axis + 1:]
            parts = [self.part(operand, _operand_window(operand, shape, window)) for operand in operands]
            results.append(self.apply(op, parts, attrs, like=like, depth=depth + 1))
        return self.join(results, axis)


def _free(value: Value) -> bool:
    """Whether ``value`` is read as it is, computing nothing: an input, a constant, a view of
    one, or a join of such."""
    producer = value.producer
    if producer is None or producer.op is ops.constant:
        return True
    return producer.op in VIEWS and plain(producer) and all(_free(v) for v in producer.inputs)


def _counts(joined: Value, created) -> bool:
    """Whether later cuts may cut at the join ``joined``, so that slices of it become its pieces."""
    return joined.type.rank <= MAX_RANK and (joined in created or _free(joined))


def regions(operands: list[Value], shape, created=frozenset()) -> tuple[int, list[tuple[int, int]]] | None:
    """The axis of the result of ``shape`` along which the first joined operand is joined, and
    the regions between every joined operand's piece boundaries along it; None if no operand
    is a concat spanning that axis, or if there would be more than MAX_REGIONS.  A join counts
    when its pieces compute nothing (``np.roll``, ``np.pad``, ``np.stack`` of inputs) or when
    this sweep made it: a join of computed values (an iterated stencil's previous step) is
    read whole, or every step would cut the regions of the last one again."""
    if len(shape) > MAX_RANK:
        return None
    axis, cuts = None, set()
    for operand in operands:
        producer = operand.producer
        if producer is None or producer.op is not ops.concat or not plain(producer) \
                or not _counts(operand, created):
            continue
        joined = producer.attrs["axis"]
        mine = joined + len(shape) - operand.type.rank
        if operand.shape[joined] != shape[mine] or (axis is not None and mine != axis):
            continue                    # broadcast along it, or joined along another axis
        axis, offset = mine, 0
        for piece in producer.inputs:
            offset += piece.shape[joined]
            cuts.add(offset)
    if axis is None:
        return None
    bounds = [0] + sorted(c for c in cuts if 0 < c < shape[axis]) + [shape[axis]]
    if len(bounds) == 2 or len(bounds) - 1 > MAX_REGIONS:
        return None
    return axis, list(zip(bounds, bounds[1:]))


def _slice_of_join(node: Node, created) -> bool:
    """A slice of a slice, or of a join that counts (``regions``) along whose joined axis it
    steps forwards (a slice of another join stays a view of it)."""
    if node.op is not ops.slice or not plain(node):
        return False
    source = node.inputs[0]
    producer = source.producer
    if producer is None or not plain(producer):
        return False
    if producer.op is ops.slice:
        return True
    if producer.op is not ops.concat or not _counts(source, created):
        return False
    span = _window_of(node)[producer.attrs["axis"]]
    return span[2] > 0 and _length(span) > 0


def recomputed_nodes(graph: Graph) -> frozenset[Node]:
    """Elementwise nodes read only through slices or by such nodes, whose parts can be computed
    where they are read: how many times each element is then computed (the slices' sizes over
    the value's; a reader's own count, scaled by how much it broadcasts the value) stays
    within RECOMPUTE, or 1 for a math routine."""
    live = kept_nodes(graph)
    readers: dict[Node, list[Node]] = {}
    for node in graph.nodes:
        if node in live:
            for value in node.inputs:
                if value.producer is not None:
                    readers.setdefault(value.producer, []).append(node)
    outputs = {value.producer for value in graph.outputs}
    times: dict[Node, float] = {}
    for node in reversed(graph.nodes):
        if node not in readers or node in outputs or not _elementwise(node) or node.output.type.size == 0:
            continue
        total = 0.0
        for reader in readers[node]:
            if reader.op is ops.slice and plain(reader):
                total += reader.output.type.size / node.output.type.size
            elif reader in times:
                total += times[reader] * max(1.0, reader.output.type.size / node.output.type.size)
            else:
                break
        else:
            if total <= (1.0 if inlines_math(node) else RECOMPUTE):
                times[node] = total
    return frozenset(times)


@dataclass(frozen=True)
class ConcatRegions(Pass):
    """``growth``: the pass stops cutting once the graph holds that many times the nodes it
    held when the pass first saw it in this pipeline run, plus SLACK: an iterated stencil
    (``new[1:-1] = ...`` ten times) would otherwise cut the regions of the regions of each
    step again at every iteration of the pipeline, multiplying the graph and its kernels."""

    name = "concat-regions"
    growth: float = 2.0
    first_seen: weakref.WeakKeyDictionary = field(default_factory=weakref.WeakKeyDictionary, compare=False,
                                                  repr=False)

    def run(self, graph: Graph) -> bool:
        if not any(node.op is ops.concat or node.op is ops.slice for node in graph.nodes):
            return False
        limit = self.growth * self.first_seen.setdefault(graph, len(graph.nodes)) + SLACK
        created: set[Value] = set()

        def split(node: Node, rw: Rewriter) -> None:
            if _slice_of_join(node, created):
                new = _Regions(rw, created).part(node.inputs[0], _window_of(node))
            elif _elementwise(node) and regions(node.inputs, node.output.shape, created) is not None \
                    and rw.size() < limit:
                new = _Regions(rw, created).apply(node.op, node.inputs, node.attrs, like=node)
            else:
                return
            rw.replace(node.output, new)
        changed = Rewriter(graph).sweep(split)
        recomputed = recomputed_nodes(graph)
        if not recomputed:
            return changed

        def push(node: Node, rw: Rewriter) -> None:
            if node.op is ops.slice and plain(node) and node.inputs[0].producer in recomputed \
                    and rw.size() < limit:
                rw.replace(node.output, _Regions(rw, created, recomputed).part(node.inputs[0], _window_of(node)))
        return Rewriter(graph).sweep(push) or changed
