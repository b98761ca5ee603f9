"""Golden IR files: each ``tests/golden/**/*.fj`` holds a ``# RUN:`` line, its input IR and
``# CHECK:`` lines that filecheck matches against the output.

    # RUN: print                      parse, verify, print
    # RUN: passes cse,dce             parse, run those passes (verifying after each), print
    # RUN: pipeline                   parse, run the default pipeline, print
    # RUN: parse-error                parsing must fail; the message is checked
    # RUN: verify-error               verifying must fail; the message is checked
    # RUN: place devices=cpu:0,gpu:0 [soft=true]          place, print (soft-placement notes first)
    # RUN: place-error devices=...                        placement must fail; the message is checked
    # RUN: partition devices=... [lossy=true] [schedule=false]   place, partition, print each graph

Every file that parses also round-trips: print -> parse -> print is identical.
"""

import pathlib
import subprocess
import sys

import pytest

from flowjit.compiler import ir
from flowjit.compiler.ir import ParseError, VerificationError

GOLDEN = pathlib.Path(__file__).parent / "golden"
FILES = sorted(GOLDEN.rglob("*.fj"))
FILECHECK = pathlib.Path(sys.executable).parent / "filecheck"


def run_directive(path: pathlib.Path) -> str:
    text = path.read_text()
    run_lines = [line.split("RUN:", 1)[1].split() for line in text.splitlines() if line.startswith("# RUN:")]
    assert len(run_lines) == 1, f"{path}: needs exactly one '# RUN:' line"
    mode, *arguments = run_lines[0]
    name = str(path.relative_to(GOLDEN.parent))
    if mode == "parse-error":
        with pytest.raises(ParseError) as info:
            ir.parse_all(text, name)
        return str(info.value)
    graphs = ir.parse_all(text, name)
    for graph in graphs:
        assert_round_trips(graph)
    if mode == "verify-error":
        with pytest.raises(VerificationError) as info:
            for graph in graphs:
                ir.verify(graph)
        return str(info.value)
    for graph in graphs:
        ir.verify(graph)
    if mode == "print":
        outputs = graphs
    elif mode in ("passes", "pipeline"):
        from flowjit.compiler.passes.pipeline import Pipeline
        names = arguments[0].split(",") if mode == "passes" else None
        options = dict(argument.split("=", 1) for argument in arguments[1:])
        outputs = [Pipeline.from_names(names, verify_each=True,
                                       fastmath=options.get("fastmath") == "true").run(graph)
                   for graph in graphs]
    elif mode in ("place", "place-error", "partition"):
        from flowjit.compiler.passes.partition import partition
        from flowjit.compiler.passes.place import PlacementError, place
        from flowjit.compiler.costmodel import CostModel
        from flowjit.devices import DeviceSet
        from flowjit.machine import STATIC
        options = dict(argument.split("=", 1) for argument in arguments)
        devices = DeviceSet.parse(options["devices"])
        soft = options.get("soft") == "true"
        costs = CostModel(machine=STATIC)          # plans that do not depend on the machine running the test
        if mode == "place-error":
            with pytest.raises(PlacementError) as info:
                place(graphs[0], devices, soft=soft, costs=costs)
            return str(info.value)
        placement = place(graphs[0], devices, soft=soft, costs=costs)
        notes = "".join(f"# {note}\n" for note in placement.notes)
        if mode == "place":
            outputs = [placement.graph]
        else:
            outputs = partition(placement.graph, devices, lossy=options.get("lossy") == "true",
                                schedule_recvs=options.get("schedule", "true") == "true", costs=costs).partitions
        for graph in outputs:
            ir.verify(graph)
            assert_round_trips(graph)
        return notes + "".join(ir.print_graph(graph) for graph in outputs)
    else:
        raise AssertionError(f"{path}: unknown RUN mode '{mode}'")
    for graph in outputs:
        ir.verify(graph)
        assert_round_trips(graph)
    return "".join(ir.print_graph(graph) for graph in outputs)


def assert_round_trips(graph) -> None:
    text = ir.print_graph(graph)
    assert ir.print_graph(ir.parse_all(text)[0]) == text


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(GOLDEN)))
def test_golden(path):
    output = run_directive(path)
    result = subprocess.run([str(FILECHECK), str(path)], input=output, text=True, capture_output=True)
    assert result.returncode == 0, f"filecheck failed on {path.name}:\n{result.stdout}{result.stderr}\n" \
                                   f"--- output ---\n{output}"


def test_there_are_golden_files():
    assert len(FILES) >= 5
