"""What `flowjit dump` shows: fusion notes in the printed IR's own names, the kernels stage
trimmed to what each kernel uses, and --dump-dir writing what it says."""

import ast
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import flowjit
from flowjit.compiler.ir import ops
from tests.programs import PROGRAMS

ROOT = pathlib.Path(__file__).parent.parent
ZSCORE = "import numpy as np\n\ndef zscore(x):\n    return (x - x.mean()) / (x.std() + 1e-8)\n"


def flowjit_cli(*args, cwd=ROOT):
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", *args], capture_output=True, text=True, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result


def printed_names(graph) -> tuple[set, dict]:
    """Top-level node names of a fused graph, and each kernel's inner node names."""
    inner = {node.name: {n.name for n in node.attrs["body"].nodes} for node in graph.nodes if node.op is ops.fused}
    return {node.name for node in graph.nodes}, inner


NOTE = re.compile(r"%(\S+) -> %(\S+): (.*?)(?: \(%(\S+) -> %(\S+)\))?")


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_fusion_notes_use_the_names_of_the_fused_stage(program):
    """Every node and kernel a note names is in the printed fused IR; the inner nodes it
    names in parentheses are in the kernels it names."""
    lowered = flowjit.jit(program.fun, static_argnums=program.static_argnums).lower(
        *program.make_args(np.random.default_rng(0)))
    top, inner = printed_names(lowered.fused)
    for note in lowered.explain_fusion():
        match = NOTE.fullmatch(note)
        assert match, note
        producer, consumer, why, inner_producer, inner_consumer = match.groups()
        assert producer in top and consumer in top, (note, sorted(top))
        for kernel in re.findall(r"\bk\d+\w*", why):
            assert kernel in top, (note, sorted(top))
        if inner_producer:
            assert inner_producer in inner.get(producer, {producer}), note
            assert inner_consumer in inner.get(consumer, {consumer}), note


def test_explain_fusion_prints_the_fused_stage_it_explains():
    """Without --stage, --explain-fusion shows the fused IR its notes refer to; with a stage
    that has no kernels it says so."""
    out = flowjit_cli("dump", "tests/programs.py:logsumexp", "--arg", "x=f32[4,8]", "--explain-fusion").stdout
    graph_text, _, notes = out.partition("# fusion boundaries")
    kernels = set(re.findall(r"^  %(k\d+_\w+) = fused", graph_text, re.M))
    assert kernels and set(re.findall(r"%(k\d+_\w+)", notes)) <= kernels
    refused = subprocess.run([sys.executable, "-m", "flowjit.cli", "dump", "tests/programs.py:logsumexp", "--arg",
                              "x=f32[4,8]", "--stage", "traced", "--explain-fusion"], capture_output=True, text=True,
                             cwd=ROOT)
    assert refused.returncode == 1 and "use it with --stage fused" in refused.stderr


def test_kernels_stage_starts_with_a_summary_and_shows_only_what_a_kernel_uses(tmp_path):
    (tmp_path / "z.py").write_text(ZSCORE)
    out = flowjit_cli("dump", "z.py:zscore", "--arg", "x=f32[1000]", "--stage", "kernels", cwd=tmp_path).stdout
    first = out.splitlines()[0]
    assert re.fullmatch(r"# 1 kernel: k0_\w+ \(reduce, domain \[1000\]\)", first), first
    assert "def fj" not in out and "numerics.py" not in out     # no library source, no helper it does not call
    assert "_parallel(" not in out and "--parallel" in out   # the variant only on request
    assert len(out.splitlines()) < 200
    module = out.split("====\n", 1)[1]
    ast.parse(module.split("\n# k0_")[0])                   # what is shown is still Python
    parallel = flowjit_cli("dump", "z.py:zscore", "--arg", "x=f32[1000]", "--stage", "kernels", "--parallel",
                           cwd=tmp_path).stdout
    assert "+++ kernel_parallel" in parallel and "+def kernel_parallel(" in parallel
    assert len(re.findall(r"^def kernel\(", parallel, re.M)) == 1    # once, as a diff


def test_kernels_stage_keeps_the_helpers_a_kernel_calls():
    """Integer floor division calls library helpers: the listing names them and where they are
    defined (their text is imported, not pasted), and it parses."""
    program = next(p for p in PROGRAMS if p.name == "integer_arithmetic")
    lowered = flowjit.jit(program.fun).lower(*program.make_args(np.random.default_rng(0)))
    text = lowered.as_text("kernels")
    assert re.search(r"# calls .*fj\.floordiv_int \(numerics\.py:\d+\)", text) and "round_float16" not in text
    for name, source in lowered.kernel_sources().items():
        assert "from flowjit.compiler.codegen import library as fj" in source and "def fj" not in source
        ast.parse(source)
    summary = text.splitlines()[0]
    assert summary.startswith(f"# {len(lowered.kernel_sources())} kernel")


def test_dump_dir_with_the_default_stage_writes_and_says_so(tmp_path):
    result = flowjit_cli("dump", f"{ROOT}/examples/models.py:repeated", "--arg", "x=f32[8]", "--dump-dir", "ir",
                         cwd=tmp_path)
    files = sorted(path.name for path in (tmp_path / "ir").iterdir())
    assert files[0] == "01-prune.fj" and len(files) >= 5
    assert f"wrote the IR after each of {len(files)} passes to ir/ (01-prune.fj ... {files[-1]})" in result.stderr
    assert result.stdout.startswith("graph @repeated")         # still the traced stage on standard output
