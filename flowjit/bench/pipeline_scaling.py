"""How compilation scales with graph size.

The default pass pipeline (issue: 36k nodes in <= 10 s) on graphs that mimic traced
models: layers of elementwise ops and reductions over a few inputs, with repeated
subexpressions (for cse), constant arithmetic (for folding), identities (for simplify)
and dead branches (for dce).

``--compile`` (``flowjit bench --compile-scaling``): a whole compile, trace to the first
result, of a program of N elementwise ops, each size in a fresh process with an empty
kernel cache: seconds, ms per op, kernels and peak RSS (issue 13: 10,000 ops in under
30 s and 2 GB, 100,000 in under 5 minutes, time per op flat).  ``--uncapped`` lifts
fusion's kernel caps (one kernel of N ops: how the caps in fuse.py were chosen).

    python -m flowjit.bench.pipeline_scaling [--sizes 1000,10000,36000] [--json PATH]
    python -m flowjit.bench.pipeline_scaling --compile [--sizes 100,1000,10000] [--program chain|tanh|tree]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from flowjit.compiler.ir import Graph, ops
from flowjit.compiler.ir.types import TensorType
from flowjit.compiler.passes.pipeline import DEFAULT_PASSES, Pipeline

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


# -- whole compiles: trace to first result, one fresh process per size -----------------------------------
def elementwise_program(ops_count: int, program: str):
    """A function of ``ops_count`` elementwise ops: ``chain`` alternates ``* c`` and ``+ c``
    (depth = ops), ``tanh`` alternates tanh and ``* c``, ``tree`` sums ``x * c_i`` pairwise
    (depth ~log2 of the ops)."""
    def chain(x):
        for i in range(ops_count):
            x = x * 1.0001 if i % 2 == 0 else x + 0.5
        return x

    def tanh(x):
        for i in range(ops_count):
            x = np.tanh(x) if i % 2 == 0 else x * 1.5
        return x

    def tree(x):
        terms = [x * float(i + 1) for i in range(max(1, ops_count // 2))]
        while len(terms) > 1:
            terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
        return terms[0]
    return {"chain": chain, "tanh": tanh, "tree": tree}[program]


def compile_once(ops_count: int, program: str, uncapped: bool) -> dict:
    """In this process (fresh, empty cache): compile and run once, check against numpy."""
    import resource

    import flowjit
    from flowjit.compiler.passes import fuse
    if uncapped:
        fuse.MAX_KERNEL_OPS = fuse.MAX_KERNEL_ROUTINES = 1 << 30
    function = elementwise_program(ops_count, program)
    x = np.linspace(-1.0, 1.0, 16)
    jitted = flowjit.jit(function)
    start = time.perf_counter()
    lowered = jitted.lower(x)
    graph_nodes = len(lowered.graph.nodes)
    kernels = sum(1 for node in lowered.fused.nodes if node.op is ops.fused)
    passes = time.perf_counter() - start
    result = jitted(x)
    seconds = time.perf_counter() - start
    with np.errstate(all="ignore"):
        expected = function(x)
    if not np.allclose(result, expected, rtol=1e-9, atol=1e-12, equal_nan=True):
        raise AssertionError(f"{program} of {ops_count} ops: compiled result differs from numpy")
    return {"program": program, "ops": ops_count, "graph_nodes": graph_nodes, "kernels": kernels,
            "seconds": seconds, "passes_seconds": passes, "ms_per_op": seconds / ops_count * 1e3,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "uncapped": uncapped}


def compile_scaling(sizes: list[int], program: str = "chain", uncapped: bool = False,
                    timeout: float = 900.0, progress=print) -> list[dict]:
    """``compile_once`` for each size in its own process with an empty kernel cache.  A
    1-op program first gives the fixed cost of any compile (Numba's first compile in a
    process); ``marginal_ms_per_op`` is the time per op above it."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # holds flowjit/
    rows = []
    progress(f"compile of N elementwise ops ({program}{', one uncapped kernel' if uncapped else ''}), "
             f"trace to first result, fresh process and empty kernel cache each:")
    progress(f"  {'ops':>7} {'kernels':>7} {'passes s':>9} {'total s':>8} {'ms/op':>7} {'above 1 op':>10} "
             f"{'peak RSS MB':>12}")
    for size in [1] + [size for size in sizes if size != 1]:
        with tempfile.TemporaryDirectory(prefix="flowjit-compile-scaling-") as cache:
            env = dict(os.environ, FLOWJIT_CACHE_DIR=cache, PYTHONPATH=root)
            command = [sys.executable, "-m", "flowjit.bench.pipeline_scaling", "--compile-one", str(size),
                       "--program", program] + (["--uncapped"] if uncapped else [])
            done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"compiling {size} ops failed:\n{done.stderr[-2000:]}")
        row = json.loads(done.stdout.strip().splitlines()[-1])
        fixed = rows[0]["seconds"] if rows else row["seconds"]
        row["marginal_ms_per_op"] = (row["seconds"] - fixed) / max(1, row["ops"] - 1) * 1e3
        rows.append(row)
        progress(f"  {row['ops']:>7} {row['kernels']:>7} {row['passes_seconds']:>9.2f} {row['seconds']:>8.2f} "
                 f"{row['ms_per_op']:>7.2f} {row['marginal_ms_per_op']:>10.2f} {row['peak_rss_mb']:>12.0f}")
    if len(rows) > 2 and rows[1]["marginal_ms_per_op"] > 0:
        progress(f"ms per op above the 1-op compile, largest vs smallest: "
                 f"{rows[-1]['marginal_ms_per_op'] / rows[1]['marginal_ms_per_op']:.2f}x (1.0 = linear)")
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", help="comma-separated (default: 1000,10000,36000 nodes; "
                        "with --compile 100,1000,10000 ops)")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--compile", action="store_true", help="whole compiles of N elementwise ops")
    parser.add_argument("--program", choices=("chain", "tanh", "tree"), default="chain")
    parser.add_argument("--uncapped", action="store_true", help="lift fusion's kernel caps (one kernel)")
    parser.add_argument("--compile-one", type=int, metavar="N", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile_one is not None:
        print(json.dumps(compile_once(args.compile_one, args.program, args.uncapped)))
        return 0
    if args.compile:
        rows = compile_scaling([int(s) for s in (args.sizes or "100,1000,10000").split(",")],
                               args.program, args.uncapped, progress=lambda text: print(text, flush=True))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(rows, handle, indent=2)
        return 0
    sizes = [int(s) for s in (args.sizes or "1000,10000,36000").split(",")]
    print(f"default pipeline ({', '.join(DEFAULT_PASSES)} to a fixed point):")
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
