"""How the default pass pipeline scales with graph size (issue: 36k nodes in <= 10 s).

Graphs mimic traced models: layers of elementwise ops and reductions over a few
inputs, with repeated subexpressions (for cse), constant arithmetic (for folding),
identities (for simplify) and dead branches (for dce).

    python -m flowjit.bench.pipeline_scaling [--sizes 1000,10000,36000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from flowjit.compiler.ir import Graph, ops
from flowjit.compiler.ir.types import TensorType
from flowjit.compiler.passes.pipeline import Pipeline

UNARY = [ops.exp, ops.tanh, ops.neg, ops.sqrt, ops.abs, ops.sin]
BINARY = [ops.add, ops.mul, ops.sub, ops.maximum, ops.div]


def synthetic_graph(target_nodes: int, seed: int = 0) -> Graph:
    rng = np.random.default_rng(seed)
    graph = Graph(f"synthetic_{target_nodes}")
    values = [graph.add_input(f"x{i}", TensorType((64, 32), np.float32)) for i in range(4)]
    one = graph.add_node(ops.constant, [], {"value": np.float32(1.0)}).output
    while len(graph.nodes) < target_nodes:
        roll = rng.random()
        pick = lambda: values[int(len(values) - 1 - min(len(values) - 1, rng.geometric(0.05)))]  # noqa: E731
        if roll < 0.35:
            node = graph.add_node(UNARY[rng.integers(len(UNARY))], [pick()])
        elif roll < 0.7:
            node = graph.add_node(BINARY[rng.integers(len(BINARY))], [pick(), pick()])
        elif roll < 0.8:                         # a repeated subexpression
            source = graph.nodes[rng.integers(len(graph.nodes))]
            if source.op.stateful or source.op is ops.constant:
                continue
            node = graph.add_node(source.op, list(source.inputs), dict(source.attrs))
        elif roll < 0.9:                         # constant arithmetic, then an identity
            c = graph.add_node(ops.constant, [], {"value": np.float32(rng.integers(1, 4))}).output
            folded = graph.add_node(ops.sub, [c, c]).output
            scaled = graph.add_node(ops.add, [folded, one]).output
            node = graph.add_node(ops.mul, [pick(), scaled])
        else:
            node = graph.add_node(ops.sum, [pick()], {"axes": (1,), "keepdims": True})
        if node.output.type.rank == 2:       # the repeats of constant arithmetic are scalars
            values.append(node.output)
    graph.outputs = values[-8:]
    return graph


def measure(sizes: list[int]) -> list[dict]:
    rows = []
    for size in sizes:
        graph = synthetic_graph(size)
        pipeline = Pipeline.from_names()
        start = time.perf_counter()
        optimized = pipeline.run(graph)
        seconds = time.perf_counter() - start
        per_pass: dict[str, float] = {}
        for record in pipeline.records:
            per_pass[record.name] = per_pass.get(record.name, 0.0) + record.seconds
        rows.append({"nodes": len(graph.nodes), "nodes_after": len(optimized.nodes), "seconds": seconds,
                     "us_per_node": seconds / len(graph.nodes) * 1e6,
                     "iterations": max(r.iteration for r in pipeline.records), "per_pass_seconds": per_pass})
        print(f"  {len(graph.nodes):>6} nodes -> {len(optimized.nodes):>6}   {seconds:7.3f} s   "
              f"{rows[-1]['us_per_node']:6.1f} us/node   {rows[-1]['iterations']} iterations   "
              + "  ".join(f"{k} {v:.2f}s" for k, v in per_pass.items()), flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,36000")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print("default pipeline (prune, simplify, fold-constants, cse, dce to a fixed point):")
    rows = measure(sizes)
    if len(rows) > 1:
        growth = rows[-1]["us_per_node"] / rows[0]["us_per_node"]
        print(f"time per node, largest vs smallest graph: {growth:.2f}x (1.0 = linear)")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
