"""Random numpy programs for differential tests, drawn with hypothesis.

A program is a list of steps over a pool of arrays; each step applies one numpy
operation to operands from the pool and appends its result.  ``build`` turns the steps
into an ordinary numpy function, so the same program runs undecorated (the oracle),
traced and interpreted, and compiled.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from scipy.special import erf, expit

DTYPES = [np.float32, np.float64, np.int32, np.bool_]
BASE_SHAPES = [(3, 4), (2, 3, 4), (5,), (4, 1), (), (4, 4), (3, 3, 3)]   # squares: x.T keeps the shape


def _flat(x):
    return np.reshape(x, (-1,))


def _axes(x, choice):
    """0-3: one axis; 4: every axis; 5: the last two (one axis below rank 2)."""
    rank = np.ndim(x)
    if choice == 4:
        return None
    if choice == 5:
        return tuple(range(max(rank - 2, 0), rank))
    return choice % rank


# Reads of a buffer beside a view of itself: y gets a buffer of its own, a kernel reads it
# next to a reversed, transposed, sliced or broadcast view, and y dies there; the kernel's
# result then feeds a barrier (a view, a matmul, a concatenation), so it is no program result
# and the driver may plan it into y's buffer -- legal only when every read is at the index
# written (driver.py's may_write_over).
SELF_VIEWS = {"reversed": lambda y: y[::-1], "reversed_last": lambda y: y[..., ::-1],
              "transposed": lambda y: y.T, "first_row": lambda y: y[:1], "last_column": lambda y: y[..., -1:],
              "column_mean": lambda y: y.mean(axis=0), "shifted": lambda y: y[1:]}
COMBINES = [np.subtract, np.add, np.maximum, np.multiply]
BARRIERS = {"then_transposed": lambda z: z.T + 1, "then_matmul": lambda z: z @ z.T,
            "then_concatenated": lambda z: np.concatenate([z, z])}


def _self_view(view, combine, barrier):
    def run(x):
        y = x * 2
        return barrier(combine(y, view(y)))
    return run


def _reduce(name):
    def run(x, axis, keepdims):
        if np.ndim(x) == 0:
            return getattr(np, name)(x)
        return getattr(np, name)(x, axis=_axes(x, axis), keepdims=keepdims)
    return run


def _arg_reduce(name):
    def run(x, axis, keepdims):                  # over one axis or all of them, no keepdims
        if np.ndim(x) == 0:
            return getattr(np, name)(x)
        axes = _axes(x, axis)
        return getattr(np, name)(x, axis=None if axes is None or isinstance(axes, tuple) else axes)
    return run


UNARY = {
    "negative": np.negative, "abs": np.abs, "exp": lambda x: np.exp(np.clip(x, -20, 20)),
    "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "sqrt_abs": lambda x: np.sqrt(np.abs(x)),
    "log1p_abs": lambda x: np.log1p(np.abs(x)), "square": np.square, "floor": np.floor,
    "sign": np.sign, "expit": expit, "erf": erf, "to_f32": lambda x: x.astype(np.float32),
    "to_f64": lambda x: x.astype(np.float64), "transpose": lambda x: x.T, "isnan": np.isnan,
    "flatten": _flat, "stride": lambda x: x[..., ::2], "last": lambda x: x[..., -1:] if np.ndim(x) else x,
    "times_2_5": lambda x: x * 2.5, "plus_1": lambda x: x + 1, "three_minus": lambda x: 3 - x,
    "logical_not": lambda x: np.logical_not(x), "reciprocal_f": lambda x: 1.0 / (np.abs(x) + 1),
    # shapes the passes rewrite: identities, repeats, in-graph constant arithmetic
    "times_1": lambda x: x * 1, "plus_0": lambda x: x + 0, "plus_neg_zero": lambda x: x + -0.0,
    "minus_0": lambda x: x - 0.0, "div_1": lambda x: x / 1, "pow_1": lambda x: x ** 1,
    "pow_2": lambda x: x ** 2, "double_neg": lambda x: -(-x), "transpose_twice": lambda x: x.T.T,
    "reshape_twice": lambda x: x.reshape(-1).reshape(np.shape(x)), "repeat": lambda x: np.tanh(x) + np.tanh(x),
    "ones_scale": lambda x: x * (np.ones_like(x) * 3 - 2), "zeros_add": lambda x: np.zeros_like(x) + x,
    "full_exp": lambda x: np.exp(np.full_like(x, 0.5)) * x, "times_zero": lambda x: x * 0,
    "minus_self": lambda x: x - x,
}
UNARY.update({f"{view}_{barrier}": _self_view(SELF_VIEWS[view], COMBINES[index % len(COMBINES)], BARRIERS[barrier])
              for index, (view, barrier) in enumerate((v, b) for v in SELF_VIEWS for b in BARRIERS)})
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "arctan2": np.arctan2, "less": np.less, "matmul": np.matmul,
    "equal": np.equal, "where_greater": lambda a, b: np.where(a > b, a, b), "hypot_like":
    lambda a, b: np.sqrt(a * a + b * b), "fmax": np.fmax,
}
REDUCTIONS = {name: _reduce(name) for name in ("sum", "mean", "max", "min", "prod")}
REDUCTIONS.update({name: _arg_reduce(name) for name in ("argmax", "argmin")})


class NumpyVariable:
    """The oracle's variable: a numpy array with the Variable API, numpy semantics."""

    def __init__(self, value):
        self.array = np.array(value, copy=True)

    def value(self):
        return self.array.copy()

    def assign(self, value):
        assert np.shape(value) == self.array.shape and np.asarray(value).dtype == self.array.dtype
        self.array = np.array(value, copy=True)
        return self

    def assign_add(self, delta):
        result = self.array + delta
        self.array = result.astype(self.array.dtype, casting="same_kind")
        return self

    def numpy(self):
        return self.array.copy()


def no_control_dependencies(items):
    """The oracle's control_dependencies: numpy runs everything in program order."""
    import contextlib
    return contextlib.nullcontext()


# Steps on variables (``random_programs(state=True)``): a read appends the variable's value to
# the pool; an assign stores a pool value of its type; control runs the next step inside
# control_dependencies on an earlier assign (or on a variable).
STATE_KINDS = ("read", "assign", "assign_add", "control")


@dataclass(frozen=True)
class RandomProgram:
    inputs: tuple[tuple[tuple[int, ...], type], ...]
    steps: tuple[tuple, ...]
    outputs: tuple[int, ...]
    variables: tuple[tuple[tuple[int, ...], type], ...] = ()     # each variable's shape and dtype

    def make_variables(self, rng: np.random.Generator, make) -> list:
        """One variable per entry of ``variables``, ``make(initial_value)`` each (flowjit.Variable,
        or NumpyVariable for the oracle), with values drawn as arguments' are."""
        return [make(value) for value in RandomProgram(self.variables, (), ()).make_args(rng)]

    def bind(self, variables: list, control_dependencies=no_control_dependencies):
        """The program as a function of its inputs over these variables."""
        def program(*arrays):
            return self.run(arrays, variables, control_dependencies)
        return program

    def make_args(self, rng: np.random.Generator) -> list[np.ndarray]:
        args = []
        for shape, dtype in self.inputs:
            if dtype is np.bool_:
                args.append(rng.random(shape) > 0.5)
            elif np.issubdtype(dtype, np.integer):
                args.append(rng.integers(-5, 6, shape).astype(dtype))
            else:
                args.append(rng.uniform(-3, 3, shape).astype(dtype))
        return args

    def __call__(self, *arrays):
        assert not self.variables, "a program with variables runs through bind(variables)"
        return self.run(arrays, [], no_control_dependencies)

    def run(self, arrays, variables, control_dependencies):
        pool = list(arrays)
        operations = []
        scope = None
        for kind, name, operands, params in self.steps:
            if kind == "control":
                target = operations[operands[0]] if operands[0] < len(operations) else variables[params[0]]
                scope = control_dependencies([target])
                continue
            with scope if scope is not None else no_control_dependencies(None):
                scope = None
                values = [pool[i] for i in operands]
                if kind == "unary":
                    pool.append(UNARY[name](*values))
                elif kind == "binary":
                    pool.append(BINARY[name](*values))
                elif kind == "reduce":
                    pool.append(REDUCTIONS[name](*values, *params))
                elif kind == "read":
                    pool.append(variables[params[0]].value())
                else:                                    # assign, assign_add
                    operations.append(getattr(variables[params[0]], kind)(values[0]))
        return tuple(pool[i] for i in self.outputs)

    def describe(self) -> str:
        lines = [f"inputs: {[(s, np.dtype(d).name) for s, d in self.inputs]}"]
        if self.variables:
            lines.append(f"variables: {[(s, np.dtype(d).name) for s, d in self.variables]}")
        index = len(self.inputs)
        for kind, name, operands, params in self.steps:
            if kind == "control":
                lines.append(f"  with control_dependencies([assign #{operands[0]} or var{params[0]}]):")
            elif kind in ("assign", "assign_add"):
                lines.append(f"  var{params[0]}.{kind}(v{operands[0]})")
            elif kind == "read":
                lines.append(f"  v{index} = var{params[0]}.value()")
                index += 1
            else:
                lines.append(f"  v{index} = {name}({', '.join(f'v{i}' for i in operands)}{', ' if params else ''}"
                             f"{', '.join(map(str, params))})")
                index += 1
        lines.append(f"  return {', '.join(f'v{i}' for i in self.outputs)}")
        return "\n".join(lines)


def _shape_of(program_pool_shapes, index):
    return program_pool_shapes[index]


def _state_step(draw, kind: str, shapes: list, variables: list, assigns: int):
    """A step on variables, or None when none fits; may add a variable (at most 3).  Before
    any variable exists a read or a control step becomes an assign, which makes one."""
    if kind in ("read", "control") and not variables:
        kind = "assign"
    if kind == "read":
        return ("read", "read", (), (draw(st.integers(0, len(variables) - 1)),))
    if kind == "control":
        return ("control", "control", (draw(st.integers(0, assigns)),), (draw(st.integers(0, len(variables) - 1)),))
    operand = len(shapes) - 1 - draw(st.integers(0, len(shapes) - 1))       # recent values first
    value = shapes[operand]
    if value.dtype.kind not in "biuf" or value.dtype == np.float16 or (kind == "assign_add" and value.dtype == np.bool_):
        return None
    fitting = [i for i, (shape, dtype) in enumerate(variables) if shape == value.shape and np.dtype(dtype) == value.dtype]
    if fitting and draw(st.booleans()):
        target = draw(st.sampled_from(fitting))
    elif len(variables) < 3:
        variables.append((value.shape, value.dtype.type))
        target = len(variables) - 1
    elif fitting:
        target = fitting[0]
    else:
        return None
    return (kind, kind, (operand,), (target,))


@st.composite
def random_programs(draw, max_steps: int = 10, state: bool = False, dtypes=None, unary=None) -> RandomProgram:
    """A random program; with ``state``, its steps also read and assign variables and run
    under control_dependencies.  ``dtypes``: what inputs are drawn from (default: ``DTYPES``);
    ``unary``: the names of the unary steps to draw (default: all of ``UNARY``)."""
    base = draw(st.sampled_from(BASE_SHAPES))
    # Input shapes broadcast against the base: the base itself, a suffix, or 1s in place of dims.
    def variant():
        choice = draw(st.integers(0, 2))
        if choice == 0 or not base:
            return base
        if choice == 1:
            return base[draw(st.integers(0, len(base))):]
        return tuple(1 if draw(st.booleans()) else d for d in base)
    inputs = tuple((variant(), draw(st.sampled_from(dtypes or DTYPES))) for _ in range(draw(st.integers(1, 3))))
    shapes = [np.empty(s, d) for s, d in inputs]   # abstract pool to keep steps well-formed
    steps = []
    variables: list = []
    assigns = 0
    kinds = ["unary", "unary", "binary", "binary", "reduce"] + (list(STATE_KINDS) * 3 if state else [])

    read_values: list[int] = []

    def pick() -> int:
        """An operand: with state, often a variable's value read earlier (maybe before an assign
        since), else recent values first."""
        if state and read_values and draw(st.booleans()):
            return draw(st.sampled_from(read_values))
        drawn = draw(st.integers(0, len(shapes) - 1))
        return len(shapes) - 1 - drawn if state else drawn
    for _ in range(draw(st.integers(1, max_steps))):
        kind = draw(st.sampled_from(kinds))
        if kind in STATE_KINDS:
            step = _state_step(draw, kind, shapes, variables, assigns)
            if step is None:
                continue
            steps.append(step)
            kind = step[0]
            if kind in ("assign", "assign_add"):
                assigns += 1
            elif kind == "read":
                shape, dtype = variables[step[3][0]]
                read_values.append(len(shapes))
                shapes.append(np.empty(shape, dtype))
            continue
        if kind == "unary":
            name = draw(st.sampled_from(sorted(unary or UNARY)))
            operands = (pick(),)
            params = ()
        elif kind == "binary":
            name = draw(st.sampled_from(sorted(BINARY)))
            operands = (pick(), pick())
            params = ()
        else:
            name = draw(st.sampled_from(sorted(REDUCTIONS)))
            operands = (pick(),)
            params = (draw(st.integers(0, 5)), draw(st.booleans()))
        probe = RandomProgram((), ((kind, name, tuple(range(len(operands))), params),), (len(operands),))
        try:
            with np.errstate(all="ignore"):
                result = probe(*[shapes[i] for i in operands])[0]
        except (ValueError, TypeError, IndexError):
            continue                      # shapes that do not broadcast, dtypes an op rejects
        if np.asarray(result).dtype.kind not in "biuf" or np.asarray(result).dtype == np.float16:
            continue
        steps.append((kind, name, operands, params))
        shapes.append(np.empty(np.shape(result), np.asarray(result).dtype))
    count = len(shapes)
    outputs = tuple(sorted(set(draw(st.lists(st.integers(len(inputs) if count > len(inputs) else 0, count - 1),
                                             min_size=1, max_size=3)))))
    return RandomProgram(inputs, tuple(steps), outputs, tuple(variables))
