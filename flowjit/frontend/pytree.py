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

    def walk(node, where: str) -> TreeDef:
        if is_leaf is not None and is_leaf(node):
            leaves.append(node)
            paths.append(where)
            return LEAF
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            return TreeDef("namedtuple", tuple(walk(getattr(node, field), f"{where}.{field}")
                                                for field in node._fields), type(node))
        if isinstance(node, (tuple, list)):
            kind = "tuple" if isinstance(node, tuple) else "list"
            return TreeDef(kind, tuple(walk(item, f"{where}.{index}") for index, item in enumerate(node)))
        if isinstance(node, dict):
            keys = tuple(node)
            return TreeDef("dict", tuple(walk(node[key], f"{where}.{key}") for key in keys), keys)
        leaves.append(node)
        paths.append(where)
        return LEAF

    treedef = walk(tree, path)
    return leaves, [p.lstrip(".") for p in paths], treedef


def unflatten(treedef: TreeDef, leaves) -> Any:
    iterator = iter(leaves)

    def build(node: TreeDef):
        if node.kind == "leaf":
            return next(iterator)
        children = [build(child) for child in node.children]
        if node.kind == "tuple":
            return tuple(children)
        if node.kind == "list":
            return children
        if node.kind == "namedtuple":
            return node.meta(*children)
        return dict(zip(node.meta, children))

    return build(treedef)
