"""``flowjit.Session``: run the parts of a graph that fetches need, given feeds (whitepaper §4.2).

``sess.run(fetches, feed_dict)`` takes fetches as tensors, ``node:port`` names, or nested
lists, tuples and dicts of them (the result has the same structure), and feeds keyed the
same way.  Each (feeds, fetches) signature is planned once: the graph is copied, fed
intermediates replace their producers, and everything the fetches do not need is pruned
(``passes/prune.py``).  Each plan compiles once per fed shape and dtype through the jit
path's compiler (``compiler/lowered.py``: passes, placement, partitioning, fusion,
kernels); ``?`` dimensions are specialized to the fed sizes first, and since kernels read
their sizes at run time a new size costs a driver, not a kernel compile (unless it changes
a reduce kernel's row length or its number of rows, which its source is written for).
Feeds are taken as a jitted function's arguments are: numpy arrays, numbers and lists, and
GPU arrays (CuPy, or anything with ``__cuda_array_interface__`` or CUDA DLPack: torch, jax)
in place, copied to the host only for a program whose buffers are there; a plan on a GPU
given GPU feeds returns GPU arrays.

State.  A graph built under ``as_default()`` may read and assign ``flowjit.Variable``s as a
jitted function does; their values live in the variables themselves (shared with jitted
functions and other sessions) and persist between runs.  Within one run, operations on a
variable happen in the order the graph was built (the trace's control edges): a read built
after an assign sees the new value, so fetching it runs that assign -- whatever the order of
the fetches.  Fetches and targets select what runs:

- a tensor: its value, and every op it needs (data and control), nothing else;
- an operation (what ``v.assign(...)`` returns, or its node's name): run it, with what it
  needs; its result is None.  ``targets=[op, ...]`` runs operations without a place in the
  result (TensorFlow's ``sess.run(train_op)`` and C++ ``target_node_names``);
- a ``flowjit.Variable``: its value once the run's operations on it are done.

Assigns nothing fetched needs are pruned: they do not run.  Each run holds the locks of the
variables it uses, as a jitted call does (``runtime/variables.py``), so runs from several
threads lose no update.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import numpy as np

from flowjit.compiler.ir import ops
from flowjit.compiler.ir.graph import Graph as IRGraph, Node, Value
from flowjit.compiler.ir.ops.misc import variable_of
from flowjit.compiler.ir.types import DYNAMIC, TensorType
from flowjit.compiler.passes.base import live_nodes
from flowjit.compiler.passes.prune import Prune
from flowjit.compiler.passes.specialize import Specialize
from flowjit.config import CompileOptions, options_from_env
from flowjit.errors import FlowjitError, TraceError, UnsupportedInputError, user_location
from flowjit.frontend import pytree
from flowjit.frontend.control import Operation
from flowjit.frontend.graph_mode import default_graph
from flowjit.frontend.inputs import check_argument_array
from flowjit.frontend.jit import TracedProgram, _arguments_for, _as_result, compile_lowered, run_executable
from flowjit.frontend.tracer import Tracer, is_variable
from flowjit.gpu import device_array, is_device_array


class SessionError(FlowjitError, ValueError):
    """A fetch or feed the graph cannot serve: an unknown name, a placeholder left unfed, a
    feed of the wrong shape or dtype.  Names the tensor and the user's line."""

    def __init__(self, message: str, location=None):
        self.message, self.location = message, location
        super().__init__(f"{location}: {message}" if location is not None else message)


@dataclass
class Plan:
    """One (feeds, fetches) signature: the pruned graph, and its compilations per fed types."""

    graph: IRGraph                          # pruned; its inputs are fed (placeholders or intermediates)
    feed_of_input: list[int]                # for each graph input, the index of the feed that gives it
    output_of_fetch: list[int | None]       # for each fetch, the graph output that gives it (None: an op)
    lowered: dict = field(default_factory=dict)        # fed types -> Lowered
    executables: dict = field(default_factory=dict)    # fed types -> executable


class Session:
    """Runs a graph: a ``flowjit.Graph``, or any IR graph (``jitted.lower(...).graph``).

    ``devices`` and ``option_fields`` are ``CompileOptions`` fields, as for ``flowjit.jit``
    (``devices=["cpu:0", "cpu:1"]``, ``fuse=False``, ``backend="interpreter"``)."""

    def __init__(self, graph=None, devices=None, *, options: CompileOptions | None = None, **option_fields):
        if graph is None:
            graph = default_graph()
            if graph is None:
                raise SessionError("flowjit.Session() needs a graph: pass one, or make the session inside "
                                   "`with graph.as_default():`", user_location())
        graph = getattr(graph, "graph", graph)        # a Lowered runs its traced graph
        if not isinstance(graph, IRGraph):
            raise SessionError(f"flowjit.Session runs a flowjit.Graph or an IR graph, not {type(graph).__name__}",
                               user_location())
        if devices is not None:
            option_fields["devices"] = devices
        self.graph = graph
        self.options = options_from_env(options).replace(**option_fields)
        from flowjit.compiler.costmodel import CostModel
        self.costs = CostModel()
        self._plans: dict[tuple, Plan] = {}
        self.closed = False

    def __repr__(self) -> str:
        return f"<flowjit.Session @{self.graph.name}: {len(self._plans)} plans>"

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Drop the compiled plans; a closed session runs nothing more."""
        self._plans.clear()
        self.closed = True

    # -- running ----------------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, *, targets=None):
        """The values of ``fetches`` (same structure; an operation's is None) with ``feed_dict``'s
        values fed, after running the operations in ``targets`` too."""
        plan, arrays, treedef, fetched = self._prepare(fetches, feed_dict, targets)
        key = tuple((array.shape, array.dtype) for array in arrays)
        executable = plan.executables.get(key)
        if executable is None:
            executable = compile_lowered(self._lowered(plan, key), f"session of graph @{self.graph.name}", 3)
            plan.executables[key] = executable
        try:
            outputs = run_executable(executable, _arguments_for(executable, arrays),
                                     f"session of graph @{self.graph.name}")
        except FlowjitError:
            plan.executables.pop(key, None)              # nothing half-compiled is kept
            raise
        results = []
        for (kind, item), index in zip(fetched, plan.output_of_fetch):
            if index is None:
                results.append(None)
                continue
            output = outputs[index]
            # A fetched feed (a placeholder's or an intermediate's) comes back as a copy, where it
            # is: a result never aliases what the caller passed.
            results.append(_as_result(_copied(output) if kind == "tensor" and _aliases(output, arrays) else output))
        return pytree.unflatten(treedef, results) if treedef is not None else None

    def lower(self, fetches, feed_dict=None, *, targets=None):
        """The ``Lowered`` (every stage, printable) of what ``run(fetches, feed_dict, targets=...)``
        runs; the feed values give only the shapes and dtypes."""
        plan, arrays, _, _ = self._prepare(fetches, feed_dict, targets)
        return self._lowered(plan, tuple((array.shape, array.dtype) for array in arrays))

    # -- planning ------------------------------------------------------------------------------------
    def _prepare(self, fetches, feed_dict, targets):
        if self.closed:
            raise SessionError("this session is closed", user_location(1))
        if fetches is None:
            leaves, treedef = [], None
        else:
            leaves, _, treedef = pytree.flatten(fetches, is_leaf=_is_fetch)
        fetched = [self._resolve_fetch(item) for item in leaves]
        target_nodes = [self._resolve_target(item, index) for index, item in enumerate(targets or ())]
        if not fetched and not target_nodes:
            raise SessionError("nothing to fetch: pass a tensor, a 'node:port' name, an operation, a Variable, "
                               "or a structure of them (or operations to run as targets=[...])", user_location(1))
        feed_dict = dict(feed_dict or {})
        feeds: list[tuple[Value, np.ndarray]] = []
        seen: dict[Value, object] = {}
        for item, given in feed_dict.items():
            value = self._resolve(item, "feed")
            if value in seen:
                raise SessionError(f"tensor '{value.tensor_name}' is fed twice (as {seen[value]!r} and {item!r})",
                                   user_location(1))
            seen[value] = item
            feeds.append((value, self._feed_array(value, given)))
        feeds.sort(key=lambda pair: pair[0].tensor_name)           # the signature does not depend on order
        key = (tuple((kind, _fetch_name(kind, item)) for kind, item in fetched),
               tuple(value.tensor_name for value, _ in feeds), tuple(sorted({node.name for node in target_nodes})))
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(fetched, [value for value, _ in feeds], target_nodes)
            self._plans[key] = plan
        arrays = [feeds[index][1] for index in plan.feed_of_input]
        return plan, arrays, treedef, fetched

    def _plan(self, fetched: list[tuple[str, object]], fed: list[Value], target_nodes: list[Node]) -> Plan:
        """Prune a copy of the graph to what ``fetched`` and the targets need when ``fed`` are given;
        then read each fetched variable after the operations on it that run."""
        graph = self.graph.copy()
        graph.outputs = []
        original_inputs = set(graph.inputs)
        tensors = [item for kind, item in fetched if kind == "tensor"]
        operations = [item.name for kind, item in fetched if kind == "operation"] + [n.name for n in target_nodes]
        before = {value.tensor_name: graph.tensor_named(value.tensor_name) for value in tensors + fed}
        intermediates = [value.tensor_name for value in fed if before[value.tensor_name] not in original_inputs]
        Prune(fetches=tuple(before[value.tensor_name].name for value in tensors),
              feeds=tuple(before[name].name for name in intermediates), targets=tuple(operations)).run(graph)
        # Prune appends an input per fed intermediate, in the order of its feeds.
        replaced = dict(zip(intermediates, [value for value in graph.inputs if value not in original_inputs]))
        position = {replaced.get(value.tensor_name, before[value.tensor_name]): index
                    for index, value in enumerate(fed)}
        unfed = [value for value in graph.inputs if value not in position]
        if unfed:
            raise SessionError(self._unfed_message(graph, fetched, target_nodes, unfed[0]), user_location(2))
        output_of_fetch: list[int | None] = []
        tensor_index = 0
        for kind, item in fetched:
            if kind == "tensor":
                output_of_fetch.append(tensor_index)
                tensor_index += 1
            elif kind == "operation":
                output_of_fetch.append(None)
            else:
                output_of_fetch.append(len(graph.outputs))
                graph.outputs.append(_final_read(graph, item))
        return Plan(graph, [position[value] for value in graph.inputs], output_of_fetch)

    def _lowered(self, plan: Plan, key: tuple):
        lowered = plan.lowered.get(key)
        if lowered is None:
            from flowjit.compiler.lowered import Lowered
            graph = plan.graph
            if any(value.type.dynamic for value in graph.inputs):
                graph = graph.copy()
                Specialize(shapes=tuple((value.name, shape) for value, (shape, _) in zip(graph.inputs, key))).run(graph)
            program = TracedProgram(graph, pytree.TreeDef("list", (pytree.LEAF,) * len(graph.outputs)),
                                    [("graph", index) for index in range(len(graph.outputs))], key)
            lowered = plan.lowered[key] = Lowered(program, self.options, self.costs)
        return lowered

    # -- names and values ------------------------------------------------------------------------------
    def _resolve_fetch(self, item) -> tuple[str, object]:
        """What a fetch names: ("tensor", Value), ("operation", Node) or ("variable", Variable)."""
        if is_variable(item):
            return "variable", item
        if isinstance(item, Operation) or (isinstance(item, str) and ":" not in item and self._operation(item)):
            return "operation", self._resolve_target(item, None)
        return "tensor", self._resolve(item, "fetch", 3)

    def _operation(self, name: str) -> Node | None:
        """The node ``name`` if it is an operation with no outputs (an assign), else None."""
        node = next((node for node in self.graph.nodes if node.name == name), None)
        return node if node is not None and not node.outputs else None

    def _resolve_target(self, item, index: int | None) -> Node:
        """The node an operation fetch or a target names: an ``Operation``, a node's name, or a
        tensor (its producer runs)."""
        what = "fetch" if index is None else f"target {index}"
        if isinstance(item, Operation):
            if item.node not in self.graph.nodes:
                raise SessionError(f"{what} {item!r} is an operation of another graph than this session's "
                                   f"@{self.graph.name}", user_location(3))
            return item.node
        if isinstance(item, str) and ":" not in item:
            node = next((node for node in self.graph.nodes if node.name == item), None)
            if node is not None:
                return node
        if isinstance(item, (str, Tracer, Value)):
            value = self._resolve(item, what, 3)
            if value.producer is None:
                raise SessionError(f"{what} '{value.tensor_name}' is a placeholder, not an operation: there is "
                                   f"nothing to run", user_location(3))
            return value.producer
        raise SessionError(f"a {what} is an operation (what v.assign(...) returns), a node's name or a tensor, "
                           f"not {type(item).__name__}", user_location(3))

    def _resolve(self, item, what: str, depth: int = 2) -> Value:
        """The graph value a fetch or feed key names."""
        if isinstance(item, Tracer):
            if item._trace.graph is not self.graph:
                raise SessionError(f"{what} {item!r} is a tensor of another graph than this session's "
                                   f"@{self.graph.name}", user_location(depth))
            return item._value
        if isinstance(item, Value):
            if not (item in self.graph.inputs or (item.producer is not None and item.producer in self.graph.nodes)):
                raise SessionError(f"{what} %{item.name} is a value of another graph than this session's "
                                   f"@{self.graph.name}", user_location(depth))
            return item
        if isinstance(item, str):
            try:
                return self.graph.tensor_named(item)
            except KeyError:
                names = [value.tensor_name for value in self.graph.inputs] + [
                    value.tensor_name for node in self.graph.nodes for value in node.outputs]
                close = difflib.get_close_matches(item, names, n=3)
                hint = f"; did you mean {', '.join(repr(name) for name in close)}?" if close else ""
                raise SessionError(f"{what} '{item}' names no tensor of graph @{self.graph.name} (tensors are named "
                                   f"'node:port', such as '{names[0] if names else 'add:0'}'){hint}",
                                   user_location(depth)) from None
        kinds = "a tensor, a 'node:port' name, an operation or a Variable" if what == "fetch" else \
            "a tensor or a 'node:port' name"
        raise SessionError(f"a {what} is {kinds}, not {type(item).__name__}", user_location(depth))

    def _feed_array(self, value: Value, given) -> np.ndarray:
        """``given`` as the array fed to ``value``: its dtype, and its shape where not ``?``."""
        what = (f"placeholder '{value.name}' ({value.type})" if value.producer is None
                else f"tensor '{value.tensor_name}' ({value.type})")
        if isinstance(given, Tracer):
            raise SessionError(f"the feed for {what} is a tensor of the graph; feed an array", user_location(2))
        if isinstance(given, np.ndarray):
            array = given
        elif is_device_array(given):
            try:
                array = device_array(given)     # a GPU array (CuPy, torch, jax) as CuPy's view: taken as jit takes it
            except UnsupportedInputError as error:
                raise SessionError(f"the feed for {what}: {error.message}", user_location(2)) from None
        else:
            try:
                array = np.asarray(given)
            except (TypeError, ValueError) as error:
                raise SessionError(f"the feed for {what} is not an array: {error}", user_location(2)) from None
            if array.dtype != value.dtype and np.can_cast(array.dtype, value.dtype, "same_kind"):
                array = array.astype(value.dtype)       # a Python number or list takes the tensor's dtype
        try:
            check_argument_array(array, value.name)
        except TraceError as error:
            raise SessionError(f"the feed for {what}: {error.message}", user_location(2)) from None
        fed = f"{array.dtype}{list(array.shape)}"
        if array.dtype != value.dtype:
            raise SessionError(f"the feed for {what} is {fed}: its dtype must be {value.dtype} "
                               f"(convert it with .astype(np.{value.dtype.name}))", user_location(2))
        if array.ndim != value.type.rank or any(size != DYNAMIC and size != got
                                                for size, got in zip(value.shape, array.shape)):
            raise SessionError(f"the feed for {what} is {fed}: its shape must be {_shape_text(value.type)}",
                               user_location(2))
        return array

    def _unfed_message(self, graph: IRGraph, fetched: list, target_nodes: list[Node], missing: Value) -> str:
        needing = []
        tensors = [item for kind, item in fetched if kind == "tensor"]
        for value, output in zip(tensors, graph.outputs):
            _, needed = live_nodes(graph, [output], set())
            if missing in needed:
                needing.append(f"fetch '{value.tensor_name}'")
        by_name = {node.name: node for node in graph.nodes}
        for node in [item for kind, item in fetched if kind == "operation"] + target_nodes:
            _, needed = live_nodes(graph, [], {by_name[node.name]})
            if missing in needed:
                needing.append(f"operation '{node.name}' ({node.op.name})")
        return (f"{', '.join(needing) or 'this run'} needs placeholder '{missing.name}' "
                f"({missing.type}), which is not fed: add it to feed_dict")


def _aliases(output, fed: list) -> bool:
    """Whether ``output`` may share memory with one of the ``fed`` arrays (bounds only: a false
    yes costs a copy)."""
    if is_device_array(output):
        import cupy
        return any(output is array or (is_device_array(array) and cupy.may_share_memory(output, array))
                   for array in fed)
    # (ndarray subclasses too: a memmap, and the plain view np.asarray makes of it)
    return any(output is array or (isinstance(output, np.ndarray) and isinstance(array, np.ndarray)
                                   and not is_device_array(array) and np.may_share_memory(output, array))
               for array in fed)


def _copied(array):
    """A copy of ``array`` where it lives (CuPy copies onto the current GPU: enter the array's)."""
    if is_device_array(array):
        with array.device:
            return array.copy()
    return np.array(array, copy=True)


def _is_fetch(item) -> bool:
    return isinstance(item, (str, Tracer, Value, Operation)) or is_variable(item)


def _fetch_name(kind: str, item) -> str:
    return item.tensor_name if kind == "tensor" else item.name


def _final_read(graph: IRGraph, variable) -> Value:
    """A read of ``variable`` after every operation on it the (pruned) graph runs."""
    writes = [node for node in graph.nodes if node.op is ops.assign_variable and variable_of(node) == variable.name]
    node = graph.add_node(ops.read_variable, [], {"var": variable.name, "shape": variable.shape,
                                                  "dtype": variable.dtype},
                          control_inputs=writes, loc=user_location(4), **variable.placement())
    return node.output


def _shape_text(type: TensorType) -> str:
    return "(" + ", ".join("None" if size == DYNAMIC else str(size) for size in type.shape) + \
        ("," if type.rank == 1 else "") + ")"
