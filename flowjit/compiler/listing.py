"""Stage ``kernels`` as a reader wants it: a one-line summary of the kernels, then each
kernel's source with only the helpers it uses, its parallel variant on request (as a diff).

The generated modules themselves (``Lowered.kernel_sources``) are what compiles; this only
chooses what to print of them.
"""

from __future__ import annotations

import ast
import difflib
import textwrap

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph, Node

PARALLEL_SUFFIX = "_parallel"


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


def _names(statement: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(statement) if isinstance(node, ast.Name)}


def listing(name: str, source: str, parallel: bool = False) -> str:
    """One kernel's module, trimmed: imports of what it uses, the helpers it calls (and theirs),
    the serial kernel; the parallel variant as a diff against it when ``parallel``, else a
    one-line note."""
    tree, lines = ast.parse(source), source.splitlines()
    functions = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    serial, variant = functions.get(name), functions.get(name + PARALLEL_SUFFIX)
    if serial is None:                            # not a generated kernel module: print it whole
        return source
    used, pending = set(), [serial] + ([variant] if variant is not None else [])
    while pending:
        for used_name in _names(pending.pop()) - used:
            used.add(used_name)
            if used_name in functions and used_name not in (name, name + PARALLEL_SUFFIX):
                pending.append(functions[used_name])
    parts = []
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef):
            if statement is serial or (statement.name in used and statement is not variant):
                parts.append(_segment(lines, statement))
        elif isinstance(statement, ast.ImportFrom) and statement.module and statement.module.startswith("flowjit"):
            kept = [alias.name for alias in statement.names if (alias.asname or alias.name) in used]
            if kept:
                parts.append(textwrap.fill(f"from {statement.module} import {', '.join(kept)}", 100,
                                           subsequent_indent="    ", break_on_hyphens=False))
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue                                  # the module docstring
        else:
            parts.append(_segment(lines, statement))
    first = _first_function(parts)
    text = "\n".join(parts[:first]) + "\n\n\n" + "\n\n\n".join(parts[first:])
    if variant is None:
        return text + "\n"
    if not parallel:
        return text + f"\n\n# {variant.name}: the same under prange, for large inputs (--parallel: as a diff)\n"
    diff = difflib.unified_diff(_segment(lines, serial).splitlines(), _segment(lines, variant).splitlines(),
                                name, variant.name, n=1, lineterm="")
    return text + "\n\n# " + variant.name + ", as a diff against " + name + ":\n" + "\n".join(diff) + "\n"


def _first_function(parts: list[str]) -> int:
    for index, part in enumerate(parts):
        if part.lstrip().startswith(("@", "def ")):
            return index
    return len(parts)


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
