"""Kernel plans: what fusion decided for one fused node, recorded on it for every later stage.

Fusion decides; backends render.  A fused node's ``plan`` attribute says

- ``kind``: the kernel kind (``KernelKind``: a loop nest, a reduction, a BLAS matmul with an
  elementwise epilogue);
- ``domain``: the iteration domain, the shape the kernel's loops run over (sizes are those
  traced; kernels take them from their arguments at run time);
- ``reduced``: the domain axes a reduce kernel reduces;
- ``embed``: for each value the body computes, by name, the domain axis each of its dimensions
  runs along (``None`` -- printed ``_`` -- for a broadcast dimension of size 1).  An operand is
  read as numpy broadcasts it against its consumer: aligned on the right, size-1 dimensions
  at index 0.  (That is a rule, not a decision: in a reduce kernel over a square domain one
  input may be read along axis 1 by ``x + v`` and along axis 0 by ``x.sum(1) + v``.)

Reduce kernels also carry how a row is read, decided by the ``plan-reductions`` pass:

- ``strategy``: ``rows`` (loops over the kept axes, one loop over each row per pass),
  ``parts`` (the whole domain is one row, reduced in parallel parts), ``columns`` (the
  innermost axis is kept: blocks of adjacent outputs, adding contiguous row stretches) or
  ``across`` (short rows: blocks of rows, each pass one loop over the row position outside
  one across the block's rows, an accumulator per row);
- ``passes``: the ordered passes over a row: the reductions each does, those of them it
  folds into its elementwise loop (the others reduce a row after it), and the full-shaped
  outputs it stores;
- ``scratch``: values written to a per-row scratch array, with the pass that writes them
  (later passes, or a reduction after the loop, read them back);
- ``direct``: kernel inputs reduced straight from their rows, with no copy.

It prints inside the node's attributes and parses back::

    plan=reduce<domain=[4, 8], reduced=[1], embed={%max=[0, _], %sub=[0, 1], ...},
                strategy=rows, passes=[{reduce=[%max], fold=[%max]}, {reduce=[%sum], fold=[%sum], store=[%div]}]>

Passes that rewrite plans (collapsing trailing reductions, ...) produce new plans; codegen reads
the plan and never re-derives it.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Mapping


class KernelKind(enum.Enum):
    LOOP = "loop"            # elementwise nodes over one domain
    REDUCE = "reduce"        # reductions over some domain axes, with the elementwise work around them
    MATMUL = "matmul"        # a BLAS call, then the elementwise epilogue over its result

    def __str__(self) -> str:
        return self.value


Embedding = tuple  # of int | None, one entry per dimension of a value


class ReduceStrategy(enum.Enum):
    ROWS = "rows"
    PARTS = "parts"
    COLUMNS = "columns"
    ACROSS = "across"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class RowPass:
    """One pass over each row of a reduce kernel (value names, in body order)."""

    reduce: tuple[str, ...] = ()       # the reductions it does
    fold: tuple[str, ...] = ()         # those accumulated inside its elementwise loop
    store: tuple[str, ...] = ()        # full-shaped outputs it stores

    def __post_init__(self):
        for name in ("reduce", "fold", "store"):
            object.__setattr__(self, name, tuple(str(item) for item in getattr(self, name)))

    def format(self) -> str:
        fields = [f"{name}=[{', '.join('%' + item for item in getattr(self, name))}]"
                  for name in ("reduce", "fold", "store") if getattr(self, name)]
        return "{" + ", ".join(fields) + "}"


@dataclass(frozen=True)
class KernelPlan:
    kind: KernelKind
    domain: tuple[int, ...]
    reduced: tuple[int, ...] = ()
    embed: Mapping[str, Embedding] = field(default_factory=dict)
    strategy: ReduceStrategy | None = None
    passes: tuple[RowPass, ...] = ()
    scratch: Mapping[str, int] = field(default_factory=dict)
    direct: tuple[str, ...] = ()

    def __post_init__(self):
        if self.strategy is not None:
            object.__setattr__(self, "strategy", ReduceStrategy(self.strategy))
        object.__setattr__(self, "passes", tuple(p if isinstance(p, RowPass) else RowPass(**p)
                                                 for p in self.passes))
        object.__setattr__(self, "scratch", {str(name): int(at) for name, at in dict(self.scratch).items()})
        object.__setattr__(self, "direct", tuple(str(name) for name in self.direct))
        object.__setattr__(self, "kind", KernelKind(self.kind))
        object.__setattr__(self, "domain", tuple(int(size) for size in self.domain))
        object.__setattr__(self, "reduced", tuple(int(axis) for axis in self.reduced))
        object.__setattr__(self, "embed", {str(name): tuple(None if e is None else int(e) for e in entries)
                                           for name, entries in dict(self.embed).items()})

    def embedding(self, name: str) -> Embedding:
        try:
            return self.embed[name]
        except KeyError:
            raise KeyError(f"the kernel plan has no embedding for %{name}") from None

    def replace(self, **changes) -> "KernelPlan":
        return dataclasses.replace(self, **changes)

    # -- text ------------------------------------------------------------------------------------
    def format(self) -> str:
        parts = [f"domain={_ints(self.domain)}"]
        if self.kind is KernelKind.REDUCE or self.reduced:
            parts.append(f"reduced={_ints(self.reduced)}")
        entries = ", ".join(f"%{name}={_ints(embedding)}" for name, embedding in self.embed.items())
        parts.append(f"embed={{{entries}}}")
        if self.strategy is not None:
            parts.append(f"strategy={self.strategy.value}")
            parts.append(f"passes=[{', '.join(p.format() for p in self.passes)}]")
        if self.scratch:
            parts.append("scratch={" + ", ".join(f"%{name}={at}" for name, at in self.scratch.items()) + "}")
        if self.direct:
            parts.append(f"direct=[{', '.join('%' + name for name in self.direct)}]")
        return f"{self.kind.value}<{', '.join(parts)}>"

    def __str__(self) -> str:
        return self.format()

    def to_json(self) -> dict:
        result = {"kind": self.kind.value, "domain": list(self.domain), "reduced": list(self.reduced),
                  "embed": {name: list(embedding) for name, embedding in self.embed.items()}}
        if self.strategy is not None:
            result.update(strategy=self.strategy.value, scratch=dict(self.scratch), direct=list(self.direct),
                          passes=[{"reduce": list(p.reduce), "fold": list(p.fold), "store": list(p.store)}
                                  for p in self.passes])
        return result


def _ints(values) -> str:
    return "[" + ", ".join("_" if value is None else str(value) for value in values) + "]"
