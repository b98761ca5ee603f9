"""flowjit.random: Threefry keys give the same numbers interpreted, fused, unfused and on two devices."""

from __future__ import annotations

import numpy as np
import pytest

import flowjit
from flowjit import random as fr
from flowjit.compiler.codegen import randomlib
from flowjit.compiler.ir.ops import random as random_ops

# Random123's and JAX's known answers for Threefry-2x32-20: (key, counter) -> (word 0, word 1).
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]

PATHS = [dict(backend="interpreter"), dict(), dict(fuse=False), dict(devices=["cpu:0", "cpu:1"])]
PATH_IDS = ["interpreted", "fused", "unfused", "two-devices"]


@pytest.mark.parametrize("key, counter, words", KNOWN_ANSWERS)
def test_threefry_known_answers(key, counter, words):
    packed = np.uint64(counter[0]) | (np.uint64(counter[1]) << np.uint64(32))
    expected = (words[0] << 32) | words[1]
    reference = random_ops.threefry2x32_bits(np.array(key[0], np.uint32), np.array(key[1], np.uint32),
                                             np.array(packed))
    assert int(reference) == expected
    assert int(randomlib.rng_threefry2x32(np.uint32(key[0]), np.uint32(key[1]), packed)) == expected


def _edge_bits() -> np.ndarray:
    """Bits that reach the conversions' ends: zero, all ones, each word's extremes, and a spread."""
    words = np.array([0, 1, 2, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF], np.uint64)
    grid = (words[:, None] << np.uint64(32)) | words[None, :]
    spread = random_ops.threefry2x32_bits(np.array(7, np.uint32), np.array(9, np.uint32),
                                          np.arange(2000, dtype=np.uint64))
    return np.concatenate([grid.ravel(), spread])


def test_compiled_conversions_equal_their_references_bit_for_bit():
    bits = _edge_bits()
    cases = [
        (random_ops.normal_f64(bits), [randomlib.rng_normal_f64(b) for b in bits], np.float64),
        (random_ops.uniform_f64(bits, -2.0, 3.0), [randomlib.rng_uniform_f64(b, -2.0, 3.0) for b in bits],
         np.float64),
        (random_ops.uniform_f32(bits, np.float32(-2), np.float32(3)),
         [randomlib.rng_uniform_f32(b, np.float32(-2), np.float32(3)) for b in bits], np.float32),
    ]
    for reference, compiled, dtype in cases:
        assert reference.dtype == dtype
        np.testing.assert_array_equal(np.asarray(compiled, dtype).view(np.uint8), reference.view(np.uint8))
    assert np.all(np.isfinite(random_ops.normal_f64(bits)))


def test_normal_transform_is_close_to_numpy_box_muller():
    bits = _edge_bits()
    u1 = ((bits >> np.uint64(32)) + np.uint64(1)) * 2.0 ** -32
    u2 = (bits & np.uint64(0xFFFFFFFF)) * 2.0 ** -32
    numpy_box_muller = np.sqrt(-2 * np.log(u1)) * np.cos(2 * np.pi * u2)
    np.testing.assert_allclose(random_ops.normal_f64(bits), numpy_box_muller, rtol=1e-12, atol=1e-13)


def _program(key, x):
    first, second = fr.split(key)
    noise = fr.normal(first, x.shape, dtype=np.float32)
    scale = fr.uniform(second, (x.shape[0], 1), dtype=np.float64, minval=0.5, maxval=1.5)
    return {"noisy": x + noise, "row_sums": (x * scale).sum(axis=1), "total": noise.mean(),
            "bits": fr.bits(key, (3,)), "wide": fr.bits(second, (2, 2), dtype=np.uint64), "keys": fr.split(key, 3)}


REDUCED = {"row_sums": 1e-12, "total": 2e-6}


@pytest.mark.parametrize("options", PATHS, ids=PATH_IDS)
def test_same_numbers_on_every_path(options):
    key = fr.key(2026)
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6)
    eager = _program(key, x)                       # computed at once by the ops' references
    compiled = flowjit.jit(_program, **options)(key, x)
    assert compiled.keys() == eager.keys()
    for name in eager:
        assert compiled[name].dtype == eager[name].dtype, name
        if name in REDUCED:        # the numbers are equal; a kernel's sum adds them in its own order
            np.testing.assert_allclose(compiled[name], eager[name], rtol=REDUCED[name], err_msg=name)
        else:
            np.testing.assert_array_equal(compiled[name], eager[name], err_msg=name)


def test_random_numbers_fuse_into_their_consumers():
    key = fr.key(1)
    lowered = flowjit.jit(lambda k, x: x * fr.uniform(k, x.shape, dtype=np.float32)).lower(
        key, np.ones((4, 8), np.float32))
    fused = lowered.fused
    kernels = [node for node in fused.nodes if node.op.name == "fused"]
    assert len(kernels) == 1
    body_ops = [node.op.name for node in kernels[0].attrs["body"].nodes]
    assert {"threefry2x32", "uniform_from_bits", "mul"} <= set(body_ops)
    source = lowered.kernel_sources()[kernels[0].name]
    assert "fj.rng_threefry2x32(" in source and "fj.rng_uniform_f32(" in source


def test_same_key_same_numbers_and_split_keys_differ():
    key = fr.key(5)
    assert np.array_equal(fr.uniform(key, (8,)), fr.uniform(key, (8,)))
    keys = fr.split(key, 4)
    assert keys.shape == (4, 2) and keys.dtype == np.uint32
    assert len({tuple(k) for k in keys} | {tuple(key)}) == 5
    draws = [fr.uniform(k, (8,)) for k in keys]
    assert all(not np.array_equal(a, b) for i, a in enumerate(draws) for b in draws[i + 1:])
    # an element's value depends on its flat position only, not on the shape around it
    np.testing.assert_array_equal(fr.normal(key, (3, 4)).ravel(), fr.normal(key, (12,)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_statistics_are_sane(dtype):
    key = fr.key(123)
    u = fr.uniform(key, (20000,), dtype=dtype)
    assert u.dtype == dtype and u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.01 and abs(u.var() - 1 / 12) < 0.005
    z = fr.normal(fr.split(key)[1], (20000,), dtype=dtype)
    assert z.dtype == dtype and abs(z.mean()) < 0.03 and abs(z.var() - 1) < 0.05
    assert 0.15 < np.mean(z > 1) < 0.17                   # P(Z > 1) = 0.1587
    ranged = fr.uniform(key, (1000,), dtype=dtype, minval=-3, maxval=-1)
    assert ranged.min() >= -3 and ranged.max() <= -1 and abs(ranged.mean() + 2) < 0.1


def test_keys_from_seeds():
    assert fr.key(0).tolist() == [0, 0] and fr.key(42).tolist() == [0, 42]
    assert fr.key(1 << 40).tolist() == [1 << 8, 0]
    assert fr.key(-1).tolist() == [0xFFFFFFFF, 0xFFFFFFFF]
    assert fr.key(np.int64(7)).tolist() == [0, 7]


def test_errors_name_what_is_wrong():
    key = fr.key(0)
    with pytest.raises(flowjit.ArgumentError, match=r"the key must be uint32\[2\].*got int64\[2\]"):
        fr.uniform(np.array([1, 2]), (2,))
    with pytest.raises(flowjit.ArgumentError, match=r"index split's result: keys\[0\]"):
        fr.normal(fr.split(key, 2), (2,))
    with pytest.raises(flowjit.OpTypeError, match="makes float32 or float64, not float16"):
        fr.uniform(key, (2,), dtype=np.float16)
    with pytest.raises(flowjit.ArgumentError, match=r"shape \[2, -1\] has a negative size"):
        fr.normal(key, (2, -1))
    with pytest.raises(flowjit.ArgumentError, match="needs an integer seed, got float"):
        fr.key(1.5)
    with pytest.raises(flowjit.ArgumentError, match="test_random.py:.*not a traced value"):
        flowjit.jit(lambda seed: fr.key(seed))(np.array(3))


def test_random_ir_prints_and_parses_back():
    lowered = flowjit.jit(lambda k: fr.uniform(k, (2, 3), minval=-1.0, maxval=2.0) + fr.normal(k, (3,))).lower(
        fr.key(1))
    for stage in ("traced", "optimized"):
        text = lowered.as_text(stage)
        assert flowjit.ir.parse(text).__str__() + "\n" == text
    assert "iota {shape=[2, 1], step=3}" in lowered.as_text("traced")
