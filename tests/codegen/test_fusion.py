"""What fuses with what: kernel counts, kinds, boundaries and the fused stage's text."""

import numpy as np
import pytest

import flowjit
from flowjit.compiler import ir
from flowjit.compiler.ir import ops
from flowjit.compiler.ir.plan import KernelKind


def kernels(function, *args, **options):
    fused = flowjit.jit(function, **options).lower(*args).fused
    return [node for node in fused.nodes if node.op is ops.fused]


def chain(x):
    return ((x * 2 + 1) * x - 3) / (x * x + 1)


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, gamma, beta):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta


def mlp(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


X = np.ones((4, 16), np.float32)


def test_elementwise_chain_is_one_kernel():
    (kernel,) = kernels(chain, np.ones(64, np.float32))
    assert kernel.attrs["plan"].kind is KernelKind.LOOP
    assert kernel.name == "k0_mul_add_mul_sub_mul_add"
    assert len(kernel.attrs["body"].nodes) >= 7


def test_softmax_is_one_row_kernel():
    (kernel,) = kernels(softmax, X)
    assert kernel.attrs["plan"].kind is KernelKind.REDUCE
    assert kernel.name == "k0_max_sub_exp_sum_div"


def test_layernorm_is_one_kernel():
    (kernel,) = kernels(layernorm, X, np.ones(16, np.float32), np.zeros(16, np.float32))
    assert kernel.attrs["plan"].kind is KernelKind.REDUCE
    names = [node.op.name for node in kernel.attrs["body"].nodes]
    assert names.count("mean") == 2 and "sqrt" in names and "div" in names


def test_mlp_epilogue_is_fused_after_each_matmul():
    args = (np.ones((8, 16), np.float32), np.ones((16, 32), np.float32), np.ones(32, np.float32),
            np.ones((32, 4), np.float32), np.ones(4, np.float32))
    first, second = kernels(mlp, *args)
    assert first.attrs["plan"].kind is second.attrs["plan"].kind is KernelKind.MATMUL
    assert [n.op.name for n in first.attrs["body"].nodes if n.op is not ops.constant] == ["matmul", "add", "maximum"]
    assert [n.op.name for n in second.attrs["body"].nodes] == ["matmul", "add"]


@pytest.mark.parametrize("function, names", [
    (lambda a, b, c, d: a @ b + c * 3.0, ["matmul", "mul", "add"]),                  # the loop first in the text
    (lambda a, b, c, d: np.maximum(0.9 * c + 0.1 * (a @ b), d * d),                  # Adam's moment, and more
     ["mul", "matmul", "mul", "add", "mul", "maximum"]),
    (lambda a, b, c, d: (a @ b) * np.exp(c) - d, ["exp", "matmul", "mul", "sub"]),
])
def test_loops_feeding_a_matmul_epilogue_run_in_it(function, names):
    """Elementwise work over the product's domain that feeds the epilogue is computed in it,
    not in a kernel of its own that writes a temporary for the epilogue to read; the result
    matches numpy fused and unfused."""
    rng = np.random.default_rng(7)
    args = (rng.standard_normal((5, 4)), rng.standard_normal((4, 6)), rng.standard_normal((5, 6)),
            rng.standard_normal((5, 6)))
    (kernel,) = kernels(function, *args)
    assert kernel.attrs["plan"].kind is KernelKind.MATMUL
    assert sorted(n.op.name for n in kernel.attrs["body"].nodes if n.op is not ops.constant) == sorted(names)
    for fuse in (True, False):
        np.testing.assert_allclose(flowjit.jit(function, fuse=fuse)(*args), function(*args), rtol=1e-12)


def test_siblings_share_one_multi_output_kernel():
    def siblings(x):
        return np.exp(x), np.sin(x) * 2
    (kernel,) = kernels(siblings, np.ones(8))
    assert len(kernel.outputs) == 2


def test_sibling_reductions_over_the_same_axes_share_one_kernel():
    """x.sum(1), x.max(1) and (x*2).min(1) read each row of x once, in one kernel; a
    reduction over other axes, or one that depends on another, is not a sibling."""
    def stats(x):
        return x.sum(axis=1), x.max(axis=1), (x * 2).min(axis=1, keepdims=True), x.sum(axis=0)
    x = np.random.default_rng(3).standard_normal((5, 300)).astype(np.float32)
    found = kernels(stats, x)
    assert sorted(len(k.outputs) for k in found) == [1, 3]
    (rows,) = [k for k in found if len(k.outputs) == 3]
    assert [n.op.name for n in rows.attrs["body"].nodes if n.op.kind.name == "REDUCTION"] == ["sum", "max", "min"]
    jitted = flowjit.jit(stats)
    expected = flowjit.interpret(jitted.lower(x).graph, x)
    for got, want in zip(jitted(x), expected):
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)
    assert len(kernels(softmax, X)) == 1                  # max then sum: dependent, one kernel anyway


def test_reduction_fuses_its_producers():
    def sum_of_squares(x, y):
        return np.sum((x - y) ** 2, axis=1)
    (kernel,) = kernels(sum_of_squares, np.ones((4, 5)), np.ones(5))
    assert kernel.attrs["plan"].kind is KernelKind.REDUCE


def test_unfused_is_one_kernel_per_op():
    assert len(kernels(chain, np.ones(8, np.float32), fuse=False)) == 7
    assert len(kernels(softmax, X, fuse=False)) == 5


def test_no_fusion_across_requested_devices():
    graph = ir.parse("""graph @g(%x: f32[4]) -> (f32[4]) {
  %a = exp %x : f32[4] device("/device:cpu:0")
  %b = neg %a : f32[4] device("/device:cpu:1")
  return %b
}""")
    from flowjit.compiler.passes.fuse import fuse
    fused, reasons = fuse(graph)
    assert len([n for n in fused.nodes if n.op is ops.fused]) == 2
    assert reasons == ["%a -> %b: different devices"]


def test_never_through_a_stateful_op():
    graph = ir.parse("""graph @g(%x: f32[4]) -> (f32[4]) {
  %a = exp %x : f32[4]
  %r = read_variable {var="v", shape=[4], dtype=f32} : f32[4]
  %b = add %a, %r : f32[4]
  return %b
}""")
    from flowjit.compiler.passes.fuse import fuse
    fused, reasons = fuse(graph)
    assert [n.op.name for n in fused.nodes] == ["fused", "read_variable", "fused"] or \
        [n.op.name for n in fused.nodes] == ["read_variable", "fused"]
    assert any("read_variable runs outside kernels" in reason for reason in reasons)


@pytest.mark.parametrize("function, args", [
    (softmax, (X,)), (chain, (np.ones(8, np.float32),)),
    (mlp, (np.ones((2, 3), np.float32), np.ones((3, 4), np.float32), np.ones(4, np.float32),
           np.ones((4, 2), np.float32), np.ones(2, np.float32))),
])
def test_fused_stage_round_trips_and_interprets(function, args):
    lowered = flowjit.jit(function).lower(*args)
    text = lowered.as_text("fused")
    graph = ir.parse(text)
    ir.verify(graph)
    assert ir.print_graph(graph) == text
    for got, want in zip(flowjit.interpret(graph, *args), flowjit.interpret(lowered.graph, *args)):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_explain_fusion_says_why():
    def logsumexp(x):
        m = np.max(x, axis=1, keepdims=True)
        return np.log(np.sum(np.exp(x - m), axis=1)) + m[:, 0]
    reasons = flowjit.jit(logsumexp).lower(X).explain_fusion()
    assert reasons == [
        "%k0_max_sub_exp_sum_log -> %reshape: reshape runs outside kernels (%max -> %reshape)",
        "%k0_max_sub_exp_sum_log -> %k1_add: joining %k0_max_sub_exp_sum_log would create a cycle between kernels "
        "(%log -> %add)",
        "%reshape -> %k1_add: producer reshape runs outside kernels (%reshape -> %add)"]


def test_full_shaped_uses_of_outer_axis_reductions_run_in_a_loop_kernel():
    """x - x.mean(axis=0) is a reduction kernel over blocks of columns, then a loop kernel:
    a second pass inside the reduction kernel would stride down the columns."""
    def center(x):
        return x - x.mean(axis=0)
    x = np.ones((8, 16), np.float32)
    first, second = kernels(center, x)
    assert (first.attrs["plan"].kind, second.attrs["plan"].kind) == (KernelKind.REDUCE, KernelKind.LOOP)
    reasons = flowjit.jit(center).lower(x).explain_fusion()
    assert any("full-shaped uses of its reductions run in a loop kernel" in r for r in reasons), reasons
    (kernel,) = kernels(softmax, X)                      # rows: the division stays in the kernel
    assert kernel.name == "k0_max_sub_exp_sum_div"


def test_sibling_reductions_feeding_one_consumer_share_its_kernel():
    """x.max(1) - x.min(1): the two reductions merge before the subtraction joins them, so
    one kernel reads each row once (it was two, the second an ancestor of the first)."""
    def spread(x):
        return x.max(axis=1) - x.min(axis=1)
    x = np.random.default_rng(8).standard_normal((6, 300)).astype(np.float32)
    (kernel,) = kernels(spread, x)
    assert [n.op.name for n in kernel.attrs["body"].nodes] == ["max", "min", "sub"]
    np.testing.assert_allclose(flowjit.jit(spread)(x), spread(x), rtol=1e-6)


def test_an_op_a_kernel_cannot_run_is_an_error_naming_it():
    """A fused body holding a shape op (which runs outside kernels) is refused by codegen with
    the op's name, never written as if it were elementwise."""
    from flowjit.compiler.codegen.kernel import kernel_source
    from flowjit.compiler.codegen.scalar import CodegenError
    graph = ir.parse("""graph @g(%x: f32[4,4]) -> (f32[4,4]) {
  %k0 = fused %x {body=graph @k0(%x: f32[4,4]) -> (f32[4,4]) {
    %t = transpose %x {perm=[1, 0]} : f32[4,4]
    %n = neg %t : f32[4,4]
    return %n
  }, plan=loop<domain=[4, 4], embed={%t=[0, 1], %n=[0, 1]}>} : f32[4,4]
  return %k0
}""")
    with pytest.raises(CodegenError, match=r"kernel k0: %t \(transpose, a shape op\) cannot run inside a kernel"):
        kernel_source(graph.nodes[0])


def _blend(a, b, alpha):
    alpha = alpha.astype(np.int32)
    return (a.astype(np.int32) * alpha + b.astype(np.int32) * (255 - alpha) + 127) // 255


BLEND_ARGS = (np.ones((4, 5, 3), np.uint8), np.ones((4, 5, 3), np.uint8), np.ones((4, 5, 1), np.uint8))


def test_a_cheap_loop_over_a_broadcast_domain_joins_its_one_reader():
    """An image's alpha cast and ``255 - alpha``, per pixel, are recomputed per channel in the
    blend's kernel rather than written by a kernel of their own for it to read; the results
    are numpy's."""
    rng = np.random.default_rng(1)
    args = tuple(rng.integers(0, 256, a.shape, dtype=np.uint8) for a in BLEND_ARGS)
    (kernel,) = kernels(_blend, *args)
    assert kernel.attrs["plan"].domain[-1] == 3
    np.testing.assert_array_equal(flowjit.jit(_blend)(*args), _blend(*args))


@pytest.mark.parametrize("program, args", [
    # read by two kernels (the blend and a sum over the pixels)
    pytest.param(lambda a, b, alpha: (_blend(a, b, alpha), (255 - alpha.astype(np.int32)).sum()), BLEND_ARGS,
                 id="shared"),
    # a math routine: recomputed per channel, it would cost more than it saves
    pytest.param(lambda x, w: x * np.exp(w), (np.ones((6, 3)), np.ones((6, 1))), id="routine"),
    # broadcast over 16 columns: more than BROADCAST_REPEAT copies of each value
    pytest.param(lambda x, w: x * (w * 2 + 1), (np.ones((6, 16)), np.ones((6, 1))), id="16-columns"),
])
def test_what_a_broadcast_loop_does_not_join(program, args):
    assert len(kernels(program, *args)) >= 2
    got, want = flowjit.jit(program)(*args), program(*args)
    for value, expected in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(value, expected)
