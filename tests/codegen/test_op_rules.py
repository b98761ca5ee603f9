"""One place per op: an op's scalar lowering (with per-target overrides), reduction rule and
cost live with its definition, and every table later stages use is derived from the registry;
a backend renders and compiles kernels from those rules."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler import ir
from flowjit.compiler.codegen import accuracy, library
from flowjit.compiler.codegen.backend import CpuBackend
from flowjit.compiler.codegen.cache import kernel_cache
from flowjit.compiler.codegen.executable import Executable
from flowjit.compiler.costmodel import flops
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.ops.base import _REGISTRY, Op, OpKind, all_ops, register, routine_ops
from flowjit.compiler.ir.ops.lowering import typed
from flowjit.compiler.ir.types import TensorType
from flowjit.compiler.lowered import KERNEL_PASSES
from flowjit.compiler.passes.fuse import ROUTINE_OPS, fuse
from flowjit.compiler.passes.pipeline import Pipeline
from flowjit.frontend import numpy_api


def test_every_op_a_kernel_runs_carries_its_rules():
    for op in all_ops().values():
        if op.kind is OpKind.ELEMENTWISE:
            assert op.lowering is not None, op
        if op.kind is OpKind.REDUCTION and op not in (ops.var, ops.std):    # (expanded into means)
            assert op.combine is not None, op
        assert op.flops >= 1, op


def test_the_tables_of_later_stages_are_read_off_the_registry():
    routines = routine_ops()
    assert {"exp", "log", "tanh", "sigmoid", "erf", "sin", "cos"} <= set(routines)
    assert set(accuracy.FUNCTIONS) == set(routines)                 # what docs/math.md measures
    assert ROUTINE_OPS == frozenset(routines.values())              # what fusion caps
    for (name, dtype), function in library.ROUTINES.items():        # what kernels call
        assert function in library.FUNCTIONS, (name, dtype, function)
    mirrored = [op for op in all_ops().values() if isinstance(op.ufunc, np.ufunc)]
    assert len(numpy_api.UFUNCS) == len(mirrored) and all(numpy_api.UFUNCS[op.ufunc] is op for op in mirrored)
    assert numpy_api.SCIPY_UFUNCS == {"erf": ops.erf, "expit": ops.sigmoid}
    assert accuracy.reference("sigmoid")(np.array([0.0])) == 0.5


def test_the_cost_model_reads_an_ops_flops_from_its_definition():
    heavy = register(Op("heavy_for_cost_test", OpKind.ELEMENTWISE, 1, lambda types, attrs: [types[0]],
                        lambda arrays, attrs: [arrays[0]], lowering=typed(lambda c, a: a), flops=37))
    try:
        graph = ir.Graph("f")
        x = graph.add_input("x", TensorType((10,), np.float32))
        node = graph.add_node(heavy, [x])
        assert flops(node) == 370
    finally:
        del _REGISTRY["heavy_for_cost_test"]
    graph = ir.parse("""
    graph @f(%x: f32[100]) -> (f32[100], f32[100]) {
      %e = exp %x : f32[100]
      %a = add %x, %x : f32[100]
      return %e, %a
    }""")
    exp_node, add_node = graph.nodes
    assert flops(exp_node) == 100 * ops.exp.flops > flops(add_node) == 100 * ops.add.flops


class _RecordingBackend(CpuBackend):
    """A backend of its own target: the ops' overrides for ``test`` apply, the CPU's do not."""
    target = "test"

    def __init__(self):
        super().__init__(kernel_cache(None))
        self.rendered, self.compiled = [], []

    def render(self, node):
        kernel = super().render(node)
        self.rendered.append(kernel)
        return kernel

    def compile(self, kernel):
        compiled = super().compile(kernel)
        self.compiled.append(compiled)
        return compiled


def _compile(graph, backend):
    optimized = Pipeline.from_names().run(graph)
    fused = Pipeline.from_names(KERNEL_PASSES).run(fuse(optimized.copy())[0])
    return optimized, Executable(fused, backend)


def test_a_target_override_applies_on_its_backend_only(monkeypatch):
    """The driver gets its kernels from the backend it is given; that backend's target picks
    the op's override (here tanh spelled through exp), the CPU target keeps the op's rule."""
    monkeypatch.setitem(ops.tanh.lowering.targets, "test",
                        lambda c, a: f"(({a} * {a}) * 0 + (1 - 2 / (np.exp(2 * {a}) + 1)))")
    jitted = flowjit.jit(lambda x: np.tanh(x) * 2)
    x = np.linspace(-3, 3, 16)
    graph = jitted.lower(x).graph
    backend = _RecordingBackend()
    _, executable = _compile(graph, backend)
    (kernel,) = backend.rendered
    assert "np.exp(2 *" in kernel.source and "fj.tanh_f64" not in kernel.source
    assert len(backend.compiled) == 1
    np.testing.assert_allclose(executable(x)[0], np.tanh(x) * 2, rtol=1e-12, atol=1e-15)
    (cpu,) = jitted.lower(x).kernel_sources().values()
    assert "fj.tanh_f64" in cpu and "np.exp(2 *" not in cpu


def test_a_new_elementwise_op_needs_only_its_definition():
    """An op defined with a type rule, a reference and a lowering compiles, fuses with its
    neighbours and matches the interpreter, with no table elsewhere to edit."""
    cube = register(Op("cube_for_test", OpKind.ELEMENTWISE, 1, lambda types, attrs: [types[0]],
                       lambda arrays, attrs: [arrays[0] ** 3],
                       lowering=typed(lambda c, a: f"({a} * {a} * {a})"), flops=2))
    try:
        graph = ir.Graph("f")
        x = graph.add_input("x", TensorType((8,), np.float64))
        cubed = graph.add_node(cube, [x], {}, [TensorType((8,), np.float64)]).outputs[0]
        total = graph.add_node(ops.add, [cubed, x], {}, [TensorType((8,), np.float64)]).outputs[0]
        graph.outputs.append(total)
        backend = _RecordingBackend()
        optimized, executable = _compile(graph, backend)
        (kernel,) = backend.rendered                        # one kernel: the new op fused with add
        assert "* v_" in kernel.source or "in0_x[i0] * in0_x[i0]" in kernel.source
        values = np.linspace(-2, 2, 8)
        # (to the last bit but FMA contraction, which kernels are compiled with)
        np.testing.assert_allclose(executable(values)[0], flowjit.interpret(optimized, values)[0], rtol=1e-15)
        np.testing.assert_allclose(executable(values)[0], values ** 3 + values, rtol=1e-15)
    finally:
        del _REGISTRY["cube_for_test"]


def test_the_reduce_writer_renders_the_ops_own_start_and_combine():
    """Swap max's rule for one of a distinctive spelling: the kernel uses it, and still computes max."""
    original = ops.max.combine

    def rule(dtype):
        start, _ = original(dtype)
        return start, lambda a, b: f"max({a}, {b})"
    object.__setattr__(ops.max, "combine", rule)
    try:
        x = np.random.default_rng(0).standard_normal((3, 70))
        jitted = flowjit.jit(lambda x: x.max(axis=1), cache_dir=None)
        (source,) = jitted.lower(x).kernel_sources().values()
        assert "max(lanes_max[j], x)" in source or "max(total_max, x)" in source, source
        np.testing.assert_array_equal(jitted(x), x.max(axis=1))
    finally:
        object.__setattr__(ops.max, "combine", original)


@pytest.mark.parametrize("dtype, op, start, combined", [
    (np.float32, ops.sum, "np.float32(0.0)", "(a + b)"), (np.bool_, ops.sum, "False", "(a | b)"),
    (np.int64, ops.prod, "np.int64(1)", "(a * b)"), (np.bool_, ops.prod, "True", "(a & b)"),
    (np.float64, ops.max, "np.float64(-np.inf)", "(b if (b > a) | (b != b) else a)"),
    (np.int32, ops.min, "np.int32(2147483647)", "(b if b < a else a)"),
    (np.float32, ops.argmin, "np.float32(np.inf)", "(b if (b < a) | (b != b) else a)")])
def test_a_reductions_start_and_combine_come_from_the_op(dtype, op, start, combined):
    got_start, combine = op.combine(np.dtype(dtype))
    assert (got_start, combine("a", "b")) == (start, combined)
