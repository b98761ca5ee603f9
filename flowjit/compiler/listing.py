"""Stage ``kernels`` as a reader wants it: a one-line summary of the kernels, then each
kernel's source with the library functions it calls, its parallel variant on request (as a diff).

The generated modules themselves (``Lowered.kernel_sources``) are what compiles; this only
chooses what to print of them.
"""

from __future__ import annotations

import ast
import difflib
import os
import textwrap

from flowjit.compiler.codegen.library import FUNCTIONS
from flowjit.compiler.codegen.writer import PARALLEL, SERIAL
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node


def kernel_domain(node: Node) -> tuple[int, ...]:
    """The iteration domain of a fused node, as its kernel plan records it."""
    return node.attrs["plan"].domain


def summary(graphs: list[Graph]) -> str:
    """``# 2 kernels: k0_matmul_add_tanh (matmul, domain [64,10]), k1_sum (reduce, domain [64,10])``,
    and the ops that run outside kernels."""
    kernels, outside = [], []
    for graph in graphs:
        for node in graph.nodes:
            if node.op is ops.fused:
                domain = ",".join(str(dim) for dim in kernel_domain(node))
                kernels.append(f"{node.name} ({node.attrs['plan'].kind}, domain [{domain}])")
            elif node.op is not ops.constant:
                outside.append(node.op.name)
    line = f"# {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}: " + (", ".join(kernels) or "none")
    if outside:
        line += f"; outside kernels: {', '.join(outside)}"
    return line + "\n"


def _segment(lines: list[str], statement: ast.stmt) -> str:
    first = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
    return "\n".join(lines[first - 1:statement.end_lineno])


def _library_calls(statement: ast.AST) -> list[str]:
    """The ``fj.<name>`` library functions a kernel calls, in order of first use."""
    names = [node.attr for node in ast.walk(statement) if isinstance(node, ast.Attribute)
             and isinstance(node.value, ast.Name) and node.value.id == "fj"]
    return list(dict.fromkeys(names))


def _where(name: str) -> str:
    """``numerics.py:19``: where a library function is defined."""
    function = FUNCTIONS.get(name)
    code = getattr(getattr(function, "py_func", None), "__code__", None) or getattr(
        getattr(function, "_defn", None), "__code__", None)
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code else "?"


def listing(name: str, source: str, parallel: bool = False) -> str:
    """One kernel's module, trimmed: its imports, a note of the library functions it calls and
    where they are defined, the serial kernel; the parallel variant as a diff against it when
    ``parallel``, else a one-line note."""
    tree, lines = ast.parse(source), source.splitlines()
    functions = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    serial, variant = functions.get(SERIAL), functions.get(PARALLEL)
    if serial is None:                            # not a generated kernel module: print it whole
        return source
    parts = [_segment(lines, statement) for statement in tree.body
             if isinstance(statement, (ast.Import, ast.ImportFrom))]
    calls = _library_calls(serial)
    if calls:
        parts.append(textwrap.fill("# calls " + ", ".join(f"fj.{call} ({_where(call)})" for call in calls), 100,
                                   subsequent_indent="#   ", break_on_hyphens=False))
    comment = lines[serial.lineno - 2] if serial.lineno >= 2 and lines[serial.lineno - 2].startswith("#") else ""
    text = "\n".join(parts) + "\n\n\n" + (comment + "\n" if comment else "") + _segment(lines, serial)
    if variant is None:
        return text + "\n"
    if not parallel:
        return text + f"\n\n# {PARALLEL}: the same under prange, for large inputs (--parallel: as a diff)\n"
    diff = difflib.unified_diff(_segment(lines, serial).splitlines(), _segment(lines, variant).splitlines(),
                                SERIAL, PARALLEL, n=1, lineterm="")
    return text + f"\n\n# {PARALLEL}, as a diff against {SERIAL}:\n" + "\n".join(diff) + "\n"


def kernels_text(graphs: list[Graph], sources: dict[str, str], parallel: bool = False) -> str:
    """Stage ``kernels``: the summary line, then each kernel under a ``# ==== kernel`` header."""
    kinds = {node.name: (node.attrs["plan"].kind, kernel_domain(node)) for graph in graphs for node in graph.nodes
             if node.op is ops.fused}
    text = summary(graphs)
    for name, source in sources.items():
        kind, domain = kinds.get(name, ("kernel", ()))
        text += (f"\n# ==== kernel {name} ({kind}, domain [{','.join(str(d) for d in domain)}]) ====\n"
                 + listing(name, source, parallel))
    return text
