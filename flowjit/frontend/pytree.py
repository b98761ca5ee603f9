"""Nested tuples, lists and dicts of leaves: flattened for tracing, rebuilt for results."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class TreeDef:
    """The structure of a nested container; leaves are numbered left to right."""

    kind: str                    # "leaf", "tuple", "list", "dict", "namedtuple"
    children: tuple = ()
    meta: Any = None             # dict keys, or the namedtuple class

    @property
    def num_leaves(self) -> int:
        return 1 if self.kind == "leaf" else sum(child.num_leaves for child in self.children)


LEAF = TreeDef("leaf")


def flatten(tree, path: str = "", is_leaf: Callable[[Any], bool] | None = None
            ) -> tuple[list, list[str], TreeDef]:
    """Return the leaves, a readable path for each (``params.w``), and the structure."""
    leaves: list = []
    paths: list[str] = []
    treedef = _walk(tree, path, leaves, paths, is_leaf)
    return leaves, [p.lstrip(".") for p in paths], treedef


def _walk(node, where: str, leaves: list, paths: list, is_leaf) -> TreeDef:
    # Module-level, as _build: a closure calling itself would keep the leaves in a cycle.
    if is_leaf is not None and is_leaf(node):
        leaves.append(node)
        paths.append(where)
        return LEAF
    if isinstance(node, tuple) and hasattr(node, "_fields"):
        return TreeDef("namedtuple", tuple(_walk(getattr(node, field), f"{where}.{field}", leaves, paths, is_leaf)
                                            for field in node._fields), type(node))
    if isinstance(node, (tuple, list)):
        kind = "tuple" if isinstance(node, tuple) else "list"
        return TreeDef(kind, tuple(_walk(item, f"{where}.{index}", leaves, paths, is_leaf)
                                   for index, item in enumerate(node)))
    if isinstance(node, dict):
        keys = tuple(node)
        return TreeDef("dict", tuple(_walk(node[key], f"{where}.{key}", leaves, paths, is_leaf) for key in keys), keys)
    leaves.append(node)
    paths.append(where)
    return LEAF


def unflatten(treedef: TreeDef, leaves) -> Any:
    # A module-level recursion, not a closure that calls itself: that closure would be a
    # reference cycle holding the leaves until the cyclic GC runs, and results held that way
    # cannot go back to the driver's output pool (each call would fault in fresh pages).
    return _build(treedef, iter(leaves))


def _build(node: TreeDef, leaves) -> Any:
    if node.kind == "leaf":
        return next(leaves)
    children = [_build(child, leaves) for child in node.children]
    if node.kind == "tuple":
        return tuple(children)
    if node.kind == "list":
        return children
    if node.kind == "namedtuple":
        return node.meta(*children)
    return dict(zip(node.meta, children))
