"""Options passed down the pipeline, and the one place environment variables are read."""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class CompileOptions:
    """How a jitted function is compiled.  Passed down; nothing below reads the environment."""

    passes: tuple[str, ...] | None = None   # None: the default pipeline
    fastmath: bool = False                  # allow rewrites that change rounding or NaN behaviour
    fuse: bool = True
    backend: str = "kernels"                # "kernels": Numba code; "interpreter": the numpy oracle
    fma: bool = True                        # kernels may fuse a*b+c into one rounding (LLVM 'contract')
    verify_each: bool = False               # verify the graph after every pass (tests turn it on)
    dump_after: str | None = None           # regex of pass names whose output is recorded
    dump_dir: str | None = None             # write one file per pass, in run order
    fold_size_limit: int = 1 << 16          # largest constant (elements) folding may create
    max_iterations: int = 8                 # fixed-point rounds of the default pipeline
    cache_dir: str | None = "default"       # kernel cache directory; None: memory only
    background_compile: bool | None = None  # parallel twins compile in a worker process (None: FLOWJIT_BACKGROUND_COMPILE, on)
    log_recompiles: bool | None = None      # log why each retrace happened (None: FLOWJIT_LOG)
    recompile_warning_limit: int = 8        # warn once a function has been traced this often
    devices: object = None                  # a DeviceSet (jit(devices=[...])); None: the session's
    soft_placement: bool = False            # fall back, and report, when a request cannot be met
    placement: str = "cost"                 # "cost": the simulated greedy placer; "random" (seeded)
    placement_seed: int = 0
    lossy_transfers: bool = False           # float32 crosses devices as its upper 16 bits (§5.5)
    schedule_recvs: bool = True             # hold each recv until shortly before its first use (§5.2)
    check_numerics: bool = False            # check every kernel's outputs for NaN/Inf (FLOWJIT_CHECK_NUMERICS=1)
    variable_timeout_s: float = 600.0       # how long a call waits for variables another call holds
    step_timeout_s: float | None = 300.0      # seconds a multi-device or cluster step may take (None: no deadline)

    def __post_init__(self):
        if self.devices is not None:
            from flowjit.devices import DeviceSet
            object.__setattr__(self, "devices", DeviceSet.of(self.devices))

    def device_set(self):
        """The devices to place on: ``devices``, else the session-wide set."""
        from flowjit.devices import current_devices
        return self.devices if self.devices is not None else current_devices()

    def replace(self, **fields) -> "CompileOptions":
        unknown = set(fields) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise TypeError(f"unknown compile option(s): {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **fields)


def env_flag(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def cache_directory(option: str | None) -> str | None:
    """The kernel cache directory: ``FLOWJIT_CACHE_DIR`` (``none`` turns the disk cache off),
    else ``~/.cache/flowjit``."""
    if option != "default":
        return option
    configured = env_flag("FLOWJIT_CACHE_DIR")
    if configured.lower() in ("none", "off", "0"):
        return None
    return configured or os.path.join(os.path.expanduser("~"), ".cache", "flowjit")


def background_compile(option: bool | None) -> bool:
    """Whether a kernel's parallel twin compiles in the compile worker while its serial twin
    runs: the option, else ``FLOWJIT_BACKGROUND_COMPILE`` (``0`` turns it off), else on.  Only
    on POSIX systems (the worker's pipes are watched with ``select`` and its jobs timed with
    ``SIGALRM``) with two cores or more."""
    if os.name != "posix" or len(os.sched_getaffinity(0)) < 2:     # (one core: nothing to gain)
        return False
    if option is not None:
        return option
    return env_flag("FLOWJIT_BACKGROUND_COMPILE", "1").lower() not in ("0", "off", "no", "false")


# CPUs (LLVM's names) whose cores run 512-bit vector code at the clock of 256-bit code, where
# LLVM's tuning still prefers 256-bit vectors (Intel's) or is asked to anyway (AMD's Zen 4 and 5,
# which split 512-bit operations in two, lose nothing).  Skylake-SP to Ice Lake lower their clock
# for 512-bit floating point, which is why LLVM prefers 256 there: they keep its choice.
WIDE_VECTOR_CPUS = frozenset({"sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids",
                              "znver4", "znver5"})


def vector_bits() -> int | None:
    """The vector width CPU kernels ask LLVM for (``"prefer-vector-width"``): ``FLOWJIT_VECTOR_BITS``
    (``128``, ``256``, ``512``; ``default`` or ``0``: LLVM's own choice for the CPU), else 512 on
    the CPUs of ``WIDE_VECTOR_CPUS``, else LLVM's choice.

    LLVM tunes Intel's AVX-512 server CPUs to vectorise with 256-bit registers, for the clock
    speed Skylake lost in 512-bit code.  flowjit's kernels are long polynomial chains: on an
    Emerald Rapids core, 512-bit lanes ran tanh and erf 1.2-1.7x faster (float32 and float64,
    bit for bit the same results), as numpy's SVML loops do."""
    configured = env_flag("FLOWJIT_VECTOR_BITS").strip().lower() or "auto"
    if configured in ("default", "0", "none"):
        return None
    if configured == "auto":
        return 512 if host_cpu_name() in WIDE_VECTOR_CPUS else None
    if configured not in ("128", "256", "512"):
        raise ValueError(f"FLOWJIT_VECTOR_BITS={configured!r}: expected 128, 256, 512, default or auto")
    return int(configured)


def width_attribute(bits: int) -> str:
    """The LLVM function attribute that asks for ``bits``-wide vectors (the kernel library's
    ``fj.vector_width`` adds it to the function it is called in)."""
    return f'"prefer-vector-width"="{bits}"'


@functools.lru_cache(maxsize=None)
def vector_width_works() -> bool:
    """Whether ``fj.vector_width`` compiles with this llvmlite (it relies on how llvmlite holds
    and writes function attributes): tried once; if not, a warning says so and kernels go
    without.  (llvmlite alone: compiling a probe with numba cost 0.3 s a process.)"""
    import llvmlite.binding as llvm
    from llvmlite import ir as llvm_ir
    attribute = width_attribute(512)
    try:
        module = llvm_ir.Module()
        function = llvm_ir.Function(module, llvm_ir.FunctionType(llvm_ir.VoidType(), []), "probe")
        set.add(function.attributes, attribute)
        llvm_ir.IRBuilder(function.append_basic_block()).ret_void()
        parsed = llvm.parse_assembly(str(module))
        parsed.verify()
        if attribute not in str(parsed):
            raise ValueError(f"LLVM dropped {attribute}")
        return True
    except Exception as error:                   # any llvmlite change that breaks it
        import warnings
        warnings.warn(f"flowjit kernels cannot ask LLVM for a vector width with this llvmlite "
                      f"({type(error).__name__}: {str(error)[:200]}); they use LLVM's choice for the CPU "
                      f"(FLOWJIT_VECTOR_BITS=default says so and silences this)", RuntimeWarning, stacklevel=2)
        return False


def kernel_vector_bits() -> int | None:
    """The width kernels ask for: ``vector_bits``, where ``fj.vector_width`` works."""
    bits = vector_bits()
    return bits if bits is not None and vector_width_works() else None


@functools.lru_cache(maxsize=None)
def host_cpu_name() -> str:
    """LLVM's name for this CPU (``emeraldrapids``, ``znver4``), asked once."""
    import llvmlite.binding as llvm
    return llvm.get_host_cpu_name()


def cache_directory_origin(directory: str) -> str:
    """Where a kernel cache directory was set, for messages: ``FLOWJIT_CACHE_DIR=<path>``
    when the environment names it, else the option or default that chose it."""
    configured = env_flag("FLOWJIT_CACHE_DIR")
    if configured and os.path.abspath(configured) == os.path.abspath(directory):
        return f"FLOWJIT_CACHE_DIR={configured}"
    if os.path.abspath(directory) == os.path.join(os.path.expanduser("~"), ".cache", "flowjit") and not configured:
        return f"the default kernel cache directory {directory} (FLOWJIT_CACHE_DIR is not set)"
    return f"jit(cache_dir={directory!r})"


def prepare_threads() -> None:
    """Before numba starts its OpenMP threads: make idle threads sleep instead of spin.

    flowjit alternates numba's parallel kernels with BLAS calls (matmul).  libgomp's idle
    threads otherwise spin for a while after each parallel loop and starve OpenBLAS's
    threads: the MLP benchmark ran 1.6x slower, numpy's own matmul too.  A value the user
    set is kept.  libgomp reads the variable once, when it is loaded, so ``import flowjit``
    calls this first thing; if another library (torch ships its own libgomp.so.1, which
    numba then shares) loaded it earlier, it is too late, and a warning says what to do.
    """
    if "OMP_WAIT_POLICY" not in os.environ and _libgomp_loaded():
        import warnings
        warnings.warn("libgomp was loaded before flowjit (by torch, or another OpenMP library) without "
                      "OMP_WAIT_POLICY=PASSIVE: its idle threads will spin after each parallel kernel and "
                      "slow the BLAS calls after it (matmul) by up to 1.6x.  Import flowjit first, or set "
                      "OMP_WAIT_POLICY=PASSIVE in the environment.", RuntimeWarning, stacklevel=3)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("KMP_BLOCKTIME", "0")


def _libgomp_loaded() -> bool:
    try:
        with open("/proc/self/maps") as maps:        # Linux; elsewhere assume not
            return any("libgomp" in line for line in maps)
    except OSError:
        return False


def native_kernels() -> str:
    """``FLOWJIT_NATIVE_KERNELS``: ``auto`` (the default) writes a native entry beside each
    cached serial kernel and runs them in a process that has not imported numba
    (codegen/native.py); ``always`` runs them with numba loaded too (the tests); ``off``
    neither writes nor runs them."""
    return _NATIVE_MODES.get(env_flag("FLOWJIT_NATIVE_KERNELS", "auto").lower(), "auto")


_NATIVE_MODES = {"auto": "auto", "always": "always", "off": "off", "0": "off", "1": "auto", "": "auto"}


def log_recompiles(option: bool | None) -> bool:
    if option is not None:
        return option
    return "recompiles" in env_flag("FLOWJIT_LOG").split(",")


def options_from_env(options: CompileOptions | None = None) -> CompileOptions:
    """Options with the ``FLOWJIT_*`` environment switches applied (read by the CLI and jit):
    ``FLOWJIT_VERIFY=1`` verifies the graph after every pass (the tests set it);
    ``FLOWJIT_CHECK_NUMERICS=1`` checks every kernel's outputs for NaN and Inf."""
    options = options or CompileOptions()
    if env_flag("FLOWJIT_VERIFY") == "1":
        options = options.replace(verify_each=True)
    if env_flag("FLOWJIT_CHECK_NUMERICS") == "1":
        options = options.replace(check_numerics=True)
    return options
