"""The pass pipeline: exactness on random programs, errors, dumps, options."""

import re
import subprocess
import sys
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings

import flowjit
from flowjit.compiler import ir
from flowjit.compiler.passes.pipeline import PassError, Pipeline
from flowjit.compiler.passes.prune import Prune, PruneError
from random_programs import random_programs

ROOT = pathlib.Path(__file__).parent.parent.parent


@settings(max_examples=300)
@given(random_programs(max_steps=12))
def test_optimized_is_bit_identical_and_never_larger(program):
    args = program.make_args(np.random.default_rng(1))
    graph = flowjit.jit(program).lower(*args).graph
    optimized = Pipeline.from_names(verify_each=True).run(graph)
    assert len(optimized.nodes) <= len(graph.nodes), program.describe()
    assert ir.print_graph(ir.parse(ir.print_graph(optimized))) == ir.print_graph(optimized)
    for got, want in zip(flowjit.interpret(optimized, *args), flowjit.interpret(graph, *args)):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes(), program.describe()


def test_jitted_functions_run_the_optimized_graph():
    def f(x):
        return (x * 1 + np.tanh(x) * np.tanh(x)).sum()
    lowered = flowjit.jit(f).lower(np.ones(4))
    assert len(lowered.optimized.nodes) < len(lowered.graph.nodes)
    assert lowered.stages[:2] == ("traced", "optimized")
    x = np.linspace(-1, 1, 4)
    assert flowjit.jit(f, backend="interpreter")(x) == f(x)


def test_pass_failure_names_the_pass_and_what_ran_before():
    class Broken:
        name = "broken"

        def run(self, graph):
            graph.nodes.reverse()
            return True
    pipeline = Pipeline.from_names(["prune", "cse"], verify_each=True)
    pipeline.passes.append(Broken())
    graph = ir.parse("graph @g(%x: f32[2]) -> (f32[2]) {\n  %a = exp %x : f32[2]\n  %b = neg %a : f32[2]\n"
                     "  return %b\n}")
    with pytest.raises(PassError, match=r"error in pass 'broken' \(after: prune, cse\): graph @g: %b reads %a"):
        pipeline.run(graph)


def test_unknown_pass_lists_the_known_ones():
    from flowjit.compiler.passes.base import PASSES
    assert {"cse", "fuse", "collapse-reductions", "plan-reductions"} <= set(PASSES)
    with pytest.raises(PassError) as info:
        Pipeline.from_names(["cse2"])
    assert str(info.value) == f"unknown pass 'cse2' (passes: {', '.join(sorted(PASSES))})"


def test_prune_with_feeds_and_fetches():
    graph = ir.parse("""graph @g(%x: f32[4], %y: f32[4]) -> (f32[4]) {
  %a = exp %x : f32[4]
  %b = log %a : f32[4]
  %c = add %b, %y : f32[4]
  %d = sin %c : f32[4]
  return %d
}""")
    Prune(fetches=("c",), feeds=("b",)).run(graph)
    assert ir.print_graph(graph) == """graph @g(%y: f32[4], %b_feed: f32[4]) -> (f32[4]) {
  %c = add %b_feed, %y : f32[4]
  return %c
}
"""
    with pytest.raises(PruneError, match="fetch 'zz' names no value of graph @g"):
        Prune(fetches=("zz",)).run(graph)


def test_options_on_jit_record_per_pass_dumps_and_times(tmp_path):
    def f(x):
        return np.tanh(x) + np.tanh(x)
    options = flowjit.CompileOptions(dump_after="cse", dump_dir=str(tmp_path))
    lowered = flowjit.jit(f, options=options).lower(np.ones(3))
    records = lowered.pass_records
    assert [r.name for r in records[:7]] == ["prune", "simplify", "constant-powers", "concat-regions", "fold-constants",
                                             "cse", "dce"]
    assert all(r.seconds >= 0 for r in records)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files[:7] == ["01-prune.fj", "02-simplify.fj", "03-constant-powers.fj", "04-concat-regions.fj",
                         "05-fold-constants.fj", "06-cse.fj", "07-dce.fj"]
    assert ir.parse((tmp_path / "06-cse.fj").read_text())
    only = flowjit.jit(f, passes=("cse",)).lower(np.ones(3))
    assert [r.name for r in only.pass_records] == ["cse"]


def test_cli_after_shows_node_count_dropping():
    """The issue's acceptance: a function computing one subexpression three times, folding
    constant arithmetic and multiplying by 1 shows the count drop pass by pass."""
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "dump", "examples/models.py:repeated",
                             "--arg", "x=f32[8]", "--after", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    headers = re.findall(r"# after pass '([a-z-]+)' \(iteration (\d)\): (\d+) -> (\d+) nodes", result.stdout)
    assert headers[0] == ("prune", "1", "24", "24")
    counts = [int(after) for *_, after in headers]
    assert counts[-1] == 7 and min(counts) == 7
    graphs = ir.parse_all(result.stdout)                # every dump parses back
    final = graphs[-1]
    assert sum(node.op.name == "tanh" for node in final.nodes) == 1
    assert not any(node.op.name == "broadcast_to" for node in final.nodes)


def test_cli_dump_dir(tmp_path):
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "dump", "examples/models.py:softmax",
                             "--arg", "x=f32[4,8]", "--stage", "optimized", "--dump-dir", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "01-prune.fj").exists()
    assert ir.parse(result.stdout)
