"""The kernel library's two flavours: routines LLVM inlines, compiled once, with FMA
contraction (kernels compiled with ``fma=True``) and without it (``library.exact``, for
``fma=False``), each flavour calling only its own routines."""

import re
import sys

import numpy as np
import pytest
from llvmlite import binding
from numba.core.registry import CPUDispatcher

from flowjit.compiler.codegen import library
from flowjit.compiler.codegen.writer import SERIAL
from helpers import kernel_twins

FMA = re.compile(r"\bv?fn?m(add|sub)\d*[sp][sd]\b")


def _dispatchers():
    library.load()
    return {(module, name): value for module in library.MODULES
            for name, value in vars(sys.modules[module]).items() if isinstance(value, CPUDispatcher)}


def test_routines_are_inlined_by_llvm_and_contract_only_in_the_default_flavour():
    """numba's own inlining (which re-types a routine at every call site) is left to the two
    helpers that read the thread count; every other routine is either ``alwaysinline`` with
    contraction, its twin in ``exact`` the same without, or compiled without contraction in both
    (inlined by LLVM or not)."""
    numba_inlined = {name for (_, name), value in _dispatchers().items()
                     if value.targetoptions.get("inline", "never") != "never"}
    assert numba_inlined == {"parallel_parts", "column_block"}
    for name, value in library.FUNCTIONS.items():
        twin = library.exact.FUNCTIONS[name]
        options = getattr(value, "targetoptions", None)
        if not library.contracts(value):       # intrinsics, the complex helpers, INLINE_EXACT
            assert twin is value, name
            assert options is None or not options.get("fastmath"), name
            continue
        assert options["fastmath"] == {"contract"}, name
        assert twin is not value and twin.targetoptions["forceinline"] and not twin.targetoptions["fastmath"]
        assert twin.py_func.__code__ is value.py_func.__code__, name


def _called(function) -> list:
    """The numba functions ``function``'s code names as globals."""
    return [function.__globals__[name] for name in function.__code__.co_names
            if isinstance(function.__globals__.get(name), CPUDispatcher)]


def test_exact_twins_call_twins_and_shared_functions_call_no_contracting_routine():
    """A twin's globals name the twins of the routines it calls, across the library's modules
    (mathlib_trig's routines call mathlib's and their own module's); a function both flavours
    share (compiled without contraction, or inlined by numba) calls no routine that contracts."""
    dispatchers = _dispatchers()
    originals = {id(value) for value in dispatchers.values() if library.contracts(value)}
    checked = 0
    for name, twin in library.exact.FUNCTIONS.items():
        if isinstance(twin, CPUDispatcher) and twin is not library.FUNCTIONS[name]:
            called = _called(twin.py_func)
            assert not any(id(callee) in originals for callee in called), name
            checked += len(called)
    assert checked > 50
    for (module, name), value in dispatchers.items():
        if id(value) not in originals:
            assert not any(id(callee) in originals for callee in _called(value.py_func)), (module, name)


@pytest.mark.skipif(not binding.get_host_cpu_features().get("fma"), reason="the host has no FMA instructions")
def test_a_kernel_without_fma_has_no_fused_multiply_add_even_in_its_routines():
    """exp's polynomial contracts into FMAs in a default kernel; compiled with fma=False the
    kernel (its routines inlined) has none, as a kernel whose routines numba inlined had none."""
    from flowjit.compiler.codegen.kernel import MODULE_HEADER
    source = (MODULE_HEADER + "\n\ndef kernel(x, out):\n    for i in range(x.shape[0]):\n"
              "        out[i] = fj.exp_f64(x[i]) + fj.tanh_f64(x[i])\n\n\n"
              "def kernel_parallel(x, out):\n    kernel(x, out)\n")
    x = np.linspace(-3, 3, 64)
    results = {}
    for fma in (True, False):
        serial, _ = kernel_twins(source, "<flavours>", fma=fma)
        assert serial.py_func.__name__ == SERIAL
        out = np.empty_like(x)
        serial(x, out)
        results[fma] = out
        assembly = "".join(serial.inspect_asm().values())
        assert bool(FMA.search(assembly)) is fma, fma
        assert not re.search(r"call\w*\s+\S*(mathlib|exp_f64|tanh_f64)", assembly), "a routine was not inlined"
    np.testing.assert_allclose(results[True], np.exp(x) + np.tanh(x), rtol=1e-15)
    np.testing.assert_allclose(results[False], np.exp(x) + np.tanh(x), rtol=1e-15)

