"""The vector width kernels ask LLVM for (``fj.vector_width``, config.vector_bits): where the
call goes in a kernel's source, that it changes the registers LLVM vectorises with (512-bit
zmm on a CPU with AVX-512, which LLVM tunes to 256 by default on Intel's server CPUs), and
that the results do not change with it."""

import re

import numpy as np
import pytest
from llvmlite import binding
from numba import typeof

import flowjit
from flowjit.compiler.codegen.driver import PARALLEL_MIN_ELEMENTS
from flowjit.compiler.codegen.writer import PARALLEL, SERIAL
from flowjit import config
from flowjit.config import vector_bits
from helpers import compiled_serial, kernel_twins, packed

AVX512 = binding.get_host_cpu_features().get("avx512f", False)


def _source(program, *args) -> str:
    ((_, source),) = flowjit.jit(program).lower(*args).kernel_sources().items()
    return source


def _function(source: str, name: str) -> list[str]:
    lines = source.splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"def {name}(")))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("def ")), len(lines))
    return lines[start:end]


@pytest.mark.parametrize("setting, bits", [("128", 128), ("256", 256), ("512", 512), ("default", None),
                                           ("0", None), (" 512 ", 512)])
def test_the_setting_is_read_from_the_environment(monkeypatch, setting, bits):
    monkeypatch.setenv("FLOWJIT_VECTOR_BITS", setting)
    assert vector_bits() == bits


@pytest.mark.parametrize("cpu, bits", [("emeraldrapids", 512), ("sapphirerapids", 512), ("znver4", 512),
                                       ("skylake-avx512", None), ("icelake-server", None), ("znver3", None),
                                       ("neoverse-v2", None)])
@pytest.mark.parametrize("setting", [None, "", "auto"])
def test_auto_asks_for_512_bits_on_the_cpus_that_run_them_at_full_clock(monkeypatch, cpu, bits, setting):
    """Not on Skylake-SP to Ice Lake, whose cores slow down in 512-bit floating point."""
    monkeypatch.setattr(config, "host_cpu_name", lambda: cpu)
    if setting is None:
        monkeypatch.delenv("FLOWJIT_VECTOR_BITS", raising=False)
    else:
        monkeypatch.setenv("FLOWJIT_VECTOR_BITS", setting)
    assert vector_bits() == bits


def test_kernels_go_without_the_call_where_llvmlite_cannot_compile_it(monkeypatch):
    """The call relies on how llvmlite holds function attributes: where that fails, one warning
    and LLVM's choice, never a kernel that does not compile."""
    monkeypatch.setenv("FLOWJIT_VECTOR_BITS", "512")
    monkeypatch.setattr(config, "vector_width_works", lambda: False)
    assert config.kernel_vector_bits() is None
    assert "fj.vector_width" not in _source(lambda x: np.tanh(x) + 1.0, np.ones(8, np.float32))
    monkeypatch.undo()
    config.vector_width_works.cache_clear()
    with pytest.warns(RuntimeWarning, match="FLOWJIT_VECTOR_BITS=default"):
        monkeypatch.setattr(config, "set", _BrokenSet, raising=False)
        assert config.vector_width_works() is False
    monkeypatch.undo()
    config.vector_width_works.cache_clear()
    assert config.vector_width_works() is True


class _BrokenSet:
    """Stands for an llvmlite whose function attributes are no longer a set."""

    @staticmethod
    def add(attributes, attribute):
        raise TypeError("descriptor 'add' for 'set' objects doesn't apply to this object")


def test_an_unknown_setting_is_an_error_that_names_the_choices(monkeypatch):
    monkeypatch.setenv("FLOWJIT_VECTOR_BITS", "1024")
    with pytest.raises(ValueError, match="FLOWJIT_VECTOR_BITS='1024'.*128, 256, 512"):
        vector_bits()


PROGRAMS = {
    "loop": (lambda x: np.tanh(x) * 2.0 + 1.0, (64, 33)),
    "row-reduce": (lambda x: np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1), (300, 130)),
    "column-reduce": (lambda x: (x * x).sum(axis=0), (300, 130)),
    "whole-reduce": (lambda x: np.sin(x).sum(), (70000,)),
}


@pytest.mark.parametrize("program", PROGRAMS, ids=list(PROGRAMS))
def test_the_call_comes_first_in_the_kernel_and_in_each_prange_body(monkeypatch, program):
    function, shape = PROGRAMS[program]
    x = np.ones(shape, np.float32)
    monkeypatch.setenv("FLOWJIT_VECTOR_BITS", "512")
    source = _source(function, x)
    for name in (SERIAL, PARALLEL):
        lines = _function(source, name)
        assert lines[1] == "    fj.vector_width(512)", lines[:3]
        for index, line in enumerate(lines):
            if " in prange(" in line:
                indent = len(line) - len(line.lstrip())
                assert lines[index + 1] == " " * (indent + 4) + "fj.vector_width(512)", lines[index:index + 2]
    assert sum(" in prange(" in line for line in _function(source, PARALLEL)) >= 1
    monkeypatch.setenv("FLOWJIT_VECTOR_BITS", "default")
    assert "fj.vector_width" not in _source(function, x)


@pytest.mark.skipif(not AVX512, reason="the host CPU has no AVX-512")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_512_bits_vectorise_with_zmm_registers_and_256_without(monkeypatch, dtype):
    """The test that fails without the call: LLVM's tuning for Intel's AVX-512 server CPUs
    (Skylake-SP on) keeps loops in ymm registers."""
    x = np.linspace(-3, 3, 1000).astype(dtype)
    registers = {}
    for setting in ("256", "512"):
        monkeypatch.setenv("FLOWJIT_VECTOR_BITS", setting)
        source = _source(lambda x: np.tanh(x) * 0.5 + x, x)
        assembly = "".join(compiled_serial(source, "vector_width.py", [x, np.empty_like(x)]).inspect_asm().values())
        assert packed(assembly, "arith", dtype)
        registers[setting] = len(re.findall(r"%zmm", assembly))
    assert registers["256"] == 0 and registers["512"] > 0, registers


@pytest.mark.skipif(not AVX512, reason="the host CPU has no AVX-512")
@pytest.mark.parametrize("program", ["loop", "row-reduce", "whole-reduce"])
def test_the_prange_bodies_numba_outlines_vectorise_with_zmm_registers_too(monkeypatch, program):
    """numba compiles a prange body as a function of its own (the parfor gufunc): the call
    inside it is what puts that function's loops in 512-bit registers.  A loop kernel's body
    only calls the serial kernel on its part, whose own call sets the width: there the whole
    module is counted."""
    function, shape = PROGRAMS[program]
    x = np.linspace(-3, 3, int(np.prod(shape))).astype(np.float32).reshape(shape)
    counts = {}
    for setting in ("256", "512"):
        monkeypatch.setenv("FLOWJIT_VECTOR_BITS", setting)
        jitted = flowjit.jit(function)
        lowered = jitted.lower(x)
        (source,) = lowered.kernel_sources().values()
        (node,) = [n for n in lowered.fused.nodes if n.op.name == "fused"]
        _, parallel = kernel_twins(source, f"vector_width_{program}.py")
        parallel.compile(tuple(typeof(np.empty(v.shape or (1,), v.dtype)) for v in list(node.inputs) + list(node.outputs)))
        assembly = parallel.inspect_asm(parallel.signatures[0])
        gufuncs = [part for part in assembly.split("\n\n") if "parfor_gufunc" in part or "__gufunc__" in part]
        counts[setting] = len(re.findall(r"%zmm", assembly if program == "loop" else "".join(gufuncs)))
    assert counts["512"] > counts["256"], counts


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_width_gives_the_same_bits(monkeypatch, dtype):
    """Lanes are independent and reductions keep their own lane order: the width changes
    no result, in serial kernels or parallel twins."""
    rng = np.random.default_rng(7)
    small = rng.standard_normal((40, 300)).astype(dtype) * 3
    large = rng.standard_normal((PARALLEL_MIN_ELEMENTS // 256 + 64, 256)).astype(dtype) * 3

    def program(x):
        shifted = x - x.max(axis=1, keepdims=True)
        return np.tanh(x) * np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True), (x * x).sum()

    results = {}
    for setting in ("256", "512"):
        monkeypatch.setenv("FLOWJIT_VECTOR_BITS", setting)
        jitted = flowjit.jit(program)
        results[setting] = [jitted(small), jitted(large)]
        flowjit.wait_for_compiles()
        results[setting].append(jitted(large))
    for got, want in zip(results["512"], results["256"]):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b, strict=True)
