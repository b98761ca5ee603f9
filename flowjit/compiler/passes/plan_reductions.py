"""plan-reductions: decide how each reduce kernel reads its rows, and record it on its plan.

For every fused reduce kernel whose plan has no strategy yet:

- **passes**: a reduction that reads another reduction's result (softmax's sum reads exp of
  x minus the max) needs a later pass over the row; each reduction goes to the first pass
  after everything it reads, and each full-shaped output to the first pass that can compute
  it;
- **fold** (rows and parts; across rows every reduction folds): with one reduced axis, a
  pass's elementwise loop also accumulates the reductions whose lanes are no wider than
  their input (float32 sums keep float32 lanes,
  ``lane_dtype``): wider lanes would make LLVM vectorise the whole loop at their width,
  half the lanes for float32 work (softmax's exp loop ran 0.43 -> 0.71 ns per element with
  float64 lanes).  Except along short rows (fewer than ``SHORT_ROW`` elements, which get
  no lanes but one accumulator) when what a reduction reads is computed by an inlined math
  function: one accumulator is one chain of dependent additions through the loop, and with
  it nothing in the loop vectorises, the function included.  Other reductions --
  argmax/argmin, reductions over several axes, those -- read a row after the loop;
- **direct**: with one reduced axis, a reduction of a kernel input reads its row in place;
- **scratch**: what such a later read needs, and what a later pass needs from an earlier
  one, is written to a per-row scratch array by the pass that first computes it (across
  rows: a block's, position-major);
- **strategy**: ``columns`` when the innermost axis is kept and one pass of plain
  reductions does it all (blocks of adjacent outputs; a full-shaped output, such as the
  centred ``x - x.mean(axis=0)`` a variance reduces and z-scores divide, is stored by that
  pass: a row plan would stride down columns); ``parts`` when the
  whole domain is one row and every reduction folds (or is an argmax/argmin): each pass runs
  in parallel parts, its scratch a domain-sized buffer (``(x - x.mean()) / x.std()`` ran
  every pass on one thread), or when one pass reduces the
  whole domain over several axes no reshape merged (a stencil's strided interior: parallel
  parts of whole rows of the last axis, which may also store full-shaped values, every row
  being one part's; all its reductions fold, so no argmax/argmin); ``across`` for short
  rows (``ACROSS_ROW``; across_rows): blocks of rows along the last kept axis, every reduction
  folded into an accumulator per row, scratch only what a later pass reads again; else ``rows``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Value
from flowjit.compiler.ir.ops.base import OpKind, inlines_math
from flowjit.compiler.ir.ops.reduction import ARG_REDUCTIONS, lane_dtype
from flowjit.compiler.ir.plan import KernelKind, KernelPlan, ReduceStrategy, RowPass
from flowjit.compiler.ir.reduce_rows import full_values, levels
from flowjit.compiler.ir.types import DYNAMIC, compute_dtype
from flowjit.compiler.passes.base import Pass

# Rows shorter than this had one accumulator per reduction, not lanes (reduce.py's WIDE_ROW;
# they have 8 or 16 lanes from 16 elements on since, and folding may vectorise there now).
# A reduction there of what an inlined math function computes reads it back from a scratch
# row after the elementwise loop, which then vectorises.  At 4M elements on this
# 2-core machine: float64 bond prices (``(1 + y[:, None]) ** -t`` summed over 30 periods)
# 92 -> 51 ms, a float32 softmax over rows of 10 30 -> 19 ms, its log-sum-exp 28 -> 18 ms.
SHORT_ROW = 128

# Rows shorter than this reduce across a block of rows (the ``across`` strategy) where
# across_rows allows: each pass is a loop over the row position outside one over the block's
# rows, which vectorises across the rows, accumulators and the math after the loop included
# (a Gaussian mixture's log-sum-exp over 16 components: a scalar log per row, and per row a
# lane setup and fold, before; 2x2 average pooling 14.7 -> 4.0 ms at 4M).
ACROSS_ROW = 64
ACROSS_MIN_ROWS = 16


def plan_rows(body: Graph, plan: KernelPlan) -> KernelPlan:
    reduced = sorted(set(plan.reduced))
    kept = [axis for axis in range(len(plan.domain)) if axis not in reduced]
    members = [n for n in body.nodes if n.op is not ops.constant]
    reductions = [n for n in members if n.op.kind is OpKind.REDUCTION]
    level, pass_of = levels(body)
    full = full_values(body, plan)
    full_outputs = [v for v in body.outputs if v in full]
    count = max(list(pass_of.values()) + [level[v] for v in full_outputs] + [0]) + 1
    if (kept and kept[-1] == len(plan.domain) - 1 and count == 1
            and not any(n.op in ARG_REDUCTIONS for n in reductions)):
        # One pass: every full-shaped output is known before any reduction (level 0), so the
        # pass that adds row stretches into the outputs' block also stores them.
        return plan.replace(strategy=ReduceStrategy.COLUMNS,
                            passes=(RowPass(reduce=[n.output.name for n in reductions],
                                            store=[v.name for v in full_outputs]),))
    done = [[n for n in reductions if pass_of[n] == p] for p in range(count)]       # (each pass's)
    if across_rows(plan, reductions, full_outputs):
        scratch: set[Value] = set()
        first = first_passes(count, reductions, pass_of, full_outputs, level, full, scratch)
        names = [[n.output.name for n in nodes] for nodes in done]
        return plan.replace(strategy=ReduceStrategy.ACROSS,
                            passes=tuple(RowPass(reduce=each, fold=each) for each in names),
                            scratch={v.name: first[v] for v in ordered_values(body) if v in scratch})
    single = len(reduced) == 1
    short = single and plan.domain[reduced[0]] < SHORT_ROW
    foldable = {n for n in reductions if n.op not in ARG_REDUCTIONS
                and lane_dtype(n).itemsize <= compute_dtype(n.inputs[0].dtype).itemsize
                and not (short and reads_inlined_math(n.inputs[0], full))}
    # The whole domain over several axes in one pass, every reduction in lanes: parts of
    # whole rows of the last axis.
    whole_rows = not kept and not single and count == 1 and bool(reductions) and foldable >= set(reductions)
    folded = foldable if single or whole_rows else set()
    # Not a value this kernel computes and also returns: its output buffer is written only
    # at the end of the row.
    direct = {n.inputs[0] for n in reductions if n.inputs[0].producer is None and single}
    # The whole domain as one row, every reduction in lanes or an argmax: each pass in
    # parallel parts (what a later pass reads back goes through a domain-sized scratch).
    parts = (not kept and single and all(n in folded or n.op in ARG_REDUCTIONS for n in reductions)) or whole_rows
    scratch = {n.inputs[0] for n in reductions if n not in folded and not parts} - direct
    first = first_passes(count, reductions, pass_of, full_outputs, level, full, scratch)
    passes = [RowPass(reduce=[n.output.name for n in done[p]], fold=[n.output.name for n in done[p] if n in folded],
                      store=[v.name for v in full_outputs if level[v] == p]) for p in range(count)]
    return plan.replace(strategy=ReduceStrategy.PARTS if parts else ReduceStrategy.ROWS, passes=tuple(passes),
                        scratch={v.name: first[v] for v in ordered_values(body) if v in scratch},
                        direct=tuple(v.name for v in body.inputs if v in direct))


def across_rows(plan: KernelPlan, reductions: list, full_outputs: list) -> bool:
    """Whether a kernel reduces short rows across them (``ACROSS_ROW``): rows (the reduced axes,
    one or a window of several) of a length the traced shapes give, at least
    ``ACROSS_MIN_ROWS`` of them along the last kept axis (a block's rows run along it); nothing
    full-shaped stored (a block would store it down its columns); no argmax/argmin (a first
    position).  (A kernel keeping the innermost axis with one pass went to ``columns`` first.)"""
    domain, reduced = plan.domain, set(plan.reduced)
    kept = [axis for axis in range(len(domain)) if axis not in reduced]
    return (bool(kept) and DYNAMIC not in domain and 1 < math.prod(domain[axis] for axis in reduced) < ACROSS_ROW
            and domain[kept[-1]] >= ACROSS_MIN_ROWS and not full_outputs
            and not any(n.op in ARG_REDUCTIONS for n in reductions))


def ordered_values(body: Graph) -> list[Value]:
    return list(body.inputs) + [v for n in body.nodes for v in n.outputs]


def reads_inlined_math(value: Value, full: set[Value]) -> bool:
    """Whether ``value``, or a value it is computed from along the row, inlines a float math
    routine (exp, log, pow...)."""
    stack, seen = [value], set()
    while stack:
        value = stack.pop()
        if value in seen or value not in full:
            continue
        seen.add(value)
        if inlines_math(value.producer):
            return True
        stack.extend(value.producer.inputs)
    return False


def first_passes(count, reductions, pass_of, full_outputs, level, full, scratch: set) -> dict[Value, int]:
    """The pass that first computes each value a pass needs; a value an earlier pass computed
    is read back from scratch (added to ``scratch``) rather than computed again."""
    first: dict[Value, int] = {}
    for p in range(count):
        stack = [v for v in [n.inputs[0] for n in reductions if pass_of[n] == p]
                 + [v for v in full_outputs if level[v] == p] if v in full]
        seen = set()
        while stack:
            value = stack.pop()
            if value in seen:
                continue
            seen.add(value)
            if value in first and first[value] < p:
                scratch.add(value)
                continue
            first.setdefault(value, p)
            stack.extend(v for v in value.producer.inputs if v in full)
    for value in scratch:
        if value not in first:
            # A source constant along the reduced axes (its extent there is 1) is written
            # into scratch by the pass whose reduction reads it, once it has been computed.
            first[value] = min(pass_of[n] for n in reductions if n.inputs[0] is value)
    return first


@dataclass(frozen=True)
class PlanReductions(Pass):
    """Record on each reduce kernel's plan how its rows are read (strategy, passes, scratch)."""

    name = "plan-reductions"

    def run(self, graph: Graph) -> bool:
        changed = False
        for node in graph.nodes:
            plan = node.attrs.get("plan") if node.op is ops.fused else None
            if plan is None or plan.kind is not KernelKind.REDUCE or plan.strategy is not None:
                continue
            node.attrs["plan"] = plan_rows(node.attrs["body"], plan)
            changed = True
        return changed
