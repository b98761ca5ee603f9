"""flowjit bench: fused vs unfused vs numpy and its peers, checked before timed.

For each workload, size and mode, the result is checked against numpy first (a wrong
answer is reported as wrong and never timed), the first call is timed on its own (it
compiles; the JSON has it), then the median of --repeat calls after a warm-up, the modes
taking turns call by call so that load from elsewhere falls on all of them alike.  A
STREAM-style triad in the same run measures memory bandwidth, which gives each
elementwise workload a lower bound (bytes that must move / bandwidth).  A dispatch row
times the chain on 16 elements; compile rows (chain, softmax, and train_mlp's training
step when the run has it) time the first call in a fresh process, with an empty and with
a warm kernel cache, from starting the interpreter to the first result, import included (medians of --compile-repeat processes, flowjit's bytecode
compiled as an installed package's is; the JSON also has the time to exit).

On a terminal one line shows the cell being measured; piped, only the table is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

import flowjit  # noqa: F401  (first: it sets libgomp's wait policy before torch loads libgomp)
from flowjit.bench.gpu_modes import GPU_MODES, gpu_unavailable, make_gpu_callable
from flowjit.bench.report import format_table, plot
from flowjit.bench.workloads import WORKLOADS, JaxOps, NumpyOps, TorchOps
from flowjit.progress import bar, on_terminal

MODES = ("numpy", "unfused", "fused", "numexpr", "jax", "torch")
EXTRA_MODES = ("torch_eager",) + GPU_MODES   # accepted by --modes, not run by default (gpu_modes.py)
SIZES = {"1M": 1 << 20, "16M": 1 << 24, "64K": 1 << 16, "4K": 1 << 12, "4M": 1 << 22, "64M": 1 << 26}


@dataclass
class Row:
    workload: str
    size: str
    mode: str
    status: str = "ok"               # ok | wrong | skipped | error
    detail: str = ""
    first_call_s: float | None = None
    median_s: float | None = None
    times_s: list = field(default_factory=list)


def tolerance(dtype: str) -> float:
    """Relative to the result's largest magnitude: float64 1e-9, any other float 2e-4, and
    integers and booleans exact (0)."""
    kind = np.dtype(dtype).kind
    if kind in "biu":
        return 0.0
    return 1e-9 if np.dtype(dtype) == np.float64 else 2e-4


def check(result, expected, dtype: str | None = None) -> str | None:
    """None if ``result`` matches ``expected``, else what differs.  A tuple is checked leaf by
    leaf; integer and boolean leaves must be exact; ``dtype`` picks the tolerance of float
    leaves (the least precise float the program computes in; None: each leaf's own dtype)."""
    if isinstance(expected, tuple):
        if not isinstance(result, tuple) or len(result) != len(expected):
            return f"{len(result) if isinstance(result, tuple) else 1} results, numpy gives {len(expected)}"
        for index, (got, want) in enumerate(zip(result, expected)):
            problem = check(got, want, dtype)
            if problem:
                return f"result {index}: {problem}"
        return None
    result, expected = np.asarray(result), np.asarray(expected)
    if result.shape != expected.shape:
        return f"shape {result.shape} != {expected.shape}"
    dtype = expected.dtype.name if dtype is None or expected.dtype.kind in "biu" else dtype
    if tolerance(dtype) == 0.0:
        mismatches = int(np.count_nonzero(result != expected))
        return f"{mismatches} of {expected.size} values differ ({dtype}, must be exact)" if mismatches else None
    result, expected = result.astype(np.float64), expected.astype(np.float64)
    both_nan = np.isnan(result) & np.isnan(expected)
    finite = np.abs(expected[np.isfinite(expected)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    with np.errstate(invalid="ignore"):       # inf - inf: a NaN that fails the check below
        error = np.where(both_nan | (result == expected), 0.0, np.abs(result - expected))
    error = float(np.max(error, initial=0.0))
    if not error <= tolerance(dtype) * scale:
        return f"max error {error:.3g} > {tolerance(dtype):g} x {scale:.3g}"
    return None


# -- modes: each returns a callable over the numpy arguments ------------------------------------------
def make_callable(mode: str, workload, args):
    if workload.callables is not None:          # a workload with state makes its own
        return workload.callables(mode, args)
    if mode in GPU_MODES:
        return make_gpu_callable(mode, workload, args)
    if mode == "torch_eager":
        ops = TorchOps()
        import torch
        tensors = [torch.from_numpy(a) for a in args]
        return lambda: workload.function(ops, *tensors)
    if mode == "numpy":
        ops = NumpyOps()
        return lambda: workload.function(ops, *args)
    if mode in ("fused", "unfused"):
        import flowjit
        ops = NumpyOps()
        jitted = flowjit.jit(lambda *a: workload.function(ops, *a), fuse=(mode == "fused"))
        return lambda: jitted(*args)
    if mode == "numexpr":
        if workload.numexpr is None:
            raise LookupError("not expressible as one numexpr expression")
        import numexpr
        expression = workload.numexpr
        return lambda: numexpr.evaluate(expression, local_dict={"x": args[0]})
    if mode == "jax":
        import jax
        ops = JaxOps()
        device_args = [jax.device_put(a) for a in args]
        compiled = jax.jit(lambda *a: workload.function(ops, *a))
        return lambda: compiled(*device_args).block_until_ready()
    if mode == "torch":
        import torch
        ops = TorchOps()
        tensors = [torch.from_numpy(a) for a in args]
        compiled = torch.compile(lambda *a: workload.function(ops, *a))
        return lambda: compiled(*tensors)
    raise ValueError(mode)


def missing_module(module: str) -> str | None:
    """None if ``module`` imports, else why not (one line)."""
    try:
        __import__(module)
    except ImportError as error:
        return f"{module} is not installed" if error.name == module else f"{module} does not import ({error})"
    return None


def available(mode: str) -> str | None:
    """None if the mode can run here, else why not."""
    if mode in GPU_MODES:
        return gpu_unavailable() or (missing_module("torch") if mode == "torch-gpu" else None)
    module = {"numexpr": "numexpr", "jax": "jax", "torch": "torch", "torch_eager": "torch"}.get(mode)
    return missing_module(module) if module else None


def workload_unavailable(workload) -> str | None:
    """None if every module the workload's numpy version needs imports, else why not."""
    for module in workload.requires:
        reason = missing_module(module)
        if reason:
            return f"needs {reason}"
    return None


def to_numpy(value):
    if isinstance(value, (tuple, list)):
        return tuple(to_numpy(leaf) for leaf in value)
    if hasattr(value, "detach"):
        return value.detach().cpu().numpy()
    if type(value).__module__.startswith("cupy"):       # a CuPy result
        return value.get()
    return np.asarray(value)


def prepare(row: Row, call, expected, dtype: str) -> bool:
    """Time the first call (it compiles), check its result, warm up; False if it is wrong.
    Warming up waits for flowjit's parallel kernels that compile in the background."""
    start = time.perf_counter()
    result = call()
    row.first_call_s = time.perf_counter() - start
    problem = check(to_numpy(result), expected, dtype)
    if problem:
        row.status, row.detail = "wrong", problem
        return False
    del result
    flowjit.wait_for_compiles()
    for _ in range(2):
        call()
    return True


def time_interleaved(cells: list, repeat: int) -> None:
    """``repeat`` rounds, each timing one call of every (row, call) in turn, then medians.

    Interleaved rather than one mode's calls back to back, so that a burst of load from
    elsewhere on a shared machine lands on every mode alike and the ratios stay fair."""
    live = list(cells)
    for _ in range(repeat):
        for row, call in list(live):
            try:
                start = time.perf_counter()
                call()
                row.times_s.append(time.perf_counter() - start)
            except Exception as error:             # a peer that fails is reported, not fatal
                row.status, row.detail, row.times_s = "error", f"{type(error).__name__}: {error}"[:200], []
                live.remove((row, call))
    for row, _ in live:
        row.median_s = statistics.median(row.times_s)


def measure(row: Row, call, expected, dtype: str, repeat: int) -> None:
    if prepare(row, call, expected, dtype):
        time_interleaved([(row, call)], repeat)


# -- the bandwidth probe ----------------------------------------------------------------------------
def stream_triad(elements: int = 1 << 25, repeat: int = 7) -> float:
    """Bytes per second of a = b + s * c over float32 arrays far larger than the caches."""
    from numba import njit, prange

    @njit(parallel=True, error_model="numpy")
    def triad(a, b, c, s):
        for i in prange(a.shape[0]):
            a[i] = b[i] + s * c[i]

    a, b, c = (np.ones(elements, np.float32) for _ in range(3))
    triad(a, b, c, np.float32(3))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        triad(a, b, c, np.float32(3))
        times.append(time.perf_counter() - start)
    return 3 * a.nbytes / statistics.median(times)


def bytes_moved(args, expected) -> int:
    return sum(np.asarray(a).nbytes for a in args) + np.asarray(expected).nbytes


# -- compile rows: a fresh process per measurement -----------------------------------------------------
COMPILE_SCRIPT = """
import time
import numpy as np
from flowjit.bench.harness import make_callable
from flowjit.bench.workloads import WORKLOADS
workload = WORKLOADS[{name!r}]
call = make_callable({mode!r}, workload, workload.make({elements}, np.random.default_rng(0)))
start = time.perf_counter()
call()
print("first result", time.perf_counter() - start, flush=True)
import flowjit
flowjit.wait_for_compiles()     # the next fresh process does not share the machine with this one's worker
"""


def compile_rows_for(workloads, modes=()) -> list[str]:
    """The compile rows of a run: chain and softmax always; train_mlp (trace, gradient,
    optimiser, compile) when the run has that workload; chain and softmax on the GPU
    (``name@gpu``, the gpu-fused mode) when the run has that mode."""
    gpu = ["chain@gpu", "softmax@gpu"] if "gpu-fused" in modes and gpu_unavailable() is None else []
    return ["chain", "softmax"] + (["train_mlp"] if "train_mlp" in workloads else []) + gpu


def compile_time(name: str, cache_dir: str) -> tuple[float, float, float]:
    """Seconds from starting a fresh interpreter to its first result (import, trace,
    compile or cache load, run), to the process's exit (interpreter teardown too), and of
    the first call alone (trace, compile or cache load, run)."""
    # The fresh process imports the flowjit this one runs (installed, or a checkout on the
    # path), from a directory of its own so that nothing in the current one shadows it.
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [package_parent] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = dict(os.environ, FLOWJIT_CACHE_DIR=cache_dir, PYTHONPATH=os.pathsep.join(paths))
    start = time.perf_counter()
    workload, _, device = name.partition("@")
    script = COMPILE_SCRIPT.format(name=workload, elements=4096, mode="gpu-fused" if device == "gpu" else "fused")
    process = subprocess.Popen([sys.executable, "-c", script], env=env,
                               cwd=cache_dir, stdout=subprocess.PIPE, text=True)
    result = call = None
    for line in process.stdout:
        if line.startswith("first result"):
            result, call = time.perf_counter() - start, float(line.split()[-1])
    if process.wait() != 0 or result is None:
        raise RuntimeError(f"the fresh process for {name} failed (exit status {process.returncode})")
    return result, time.perf_counter() - start, call


# -- the run ----------------------------------------------------------------------------------------
def machine() -> dict:
    import numba
    info = {"python": platform.python_version(), "numpy": np.__version__, "numba": numba.__version__,
            "machine": platform.machine(), "processor": platform.processor(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as stream:
            for line in stream:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    for module in ("jax", "torch", "numexpr"):
        try:
            info[module] = __import__(module).__version__
        except ImportError:
            info[module] = None
    return info


class Progress:
    """One live line for the cell being measured: a bar rewritten in place on a terminal,
    nothing at all when the stream is not one (piped, or in tests)."""

    def __init__(self, stream=None, live: bool | None = None):
        self.stream = stream if stream is not None else sys.stderr
        self.live = on_terminal(self.stream) if live is None else live
        self.total, self.done = 0, 0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0

    def __call__(self, text: str) -> None:
        """Show ``text`` as the cell now being measured."""
        if not self.live:
            return
        self.stream.write(f"\r\033[K{bar(self.done, self.total)} {self.done}/{self.total} {text}")
        self.stream.flush()

    def step(self) -> None:
        self.done += 1

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\033[K")
            self.stream.flush()


def cell_count(workloads, sizes, modes, compile_rows: bool) -> int:
    """The cells a run measures: the triad, each workload's sizes x modes, dispatch, compile rows."""
    cells = 1 + len(modes)
    for name in workloads:
        cells += (len(sizes) if WORKLOADS[name].sized else 1) * len(modes)
    return cells + (len(compile_rows_for(workloads, modes)) if compile_rows else 0)


def run(workloads, sizes, modes, repeat, progress: Progress | None = None, compile_rows: bool = True,
        bandwidth_elements: int = 1 << 25, compile_repeat: int = 3) -> dict:
    """Every figure, gathered into one report as it is measured: a workload that cannot run
    here is skipped, a peer that fails is an error row, and an interrupt (Ctrl-C) ends the
    run with what was measured so far (``report["interrupted"]``)."""
    progress = progress if progress is not None else Progress(live=False)
    progress.start(cell_count(workloads, sizes, modes, compile_rows))
    report = {"machine": machine(), "bandwidth_bytes_per_s": None, "bounds_s": {}, "rows": [], "dispatch": [],
              "compile": [], "interrupted": False}
    try:
        progress("memory bandwidth (STREAM triad)")
        report["bandwidth_bytes_per_s"] = stream_triad(bandwidth_elements)
        if any(mode in GPU_MODES for mode in modes) and gpu_unavailable() is None:
            import cupy

            from flowjit.gpu_figures import copy_bandwidth, properties
            index = cupy.cuda.Device().id
            report["machine"]["gpu"] = properties(index)["name"]
            report["gpu_bandwidth_bytes_per_s"] = copy_bandwidth(index)     # (measured in this run)
            report["gpu_bounds_s"] = {}
        progress.step()
        rng = np.random.default_rng(0)
        for name in workloads:
            run_workload(report, WORKLOADS[name], sizes, modes, repeat, rng, progress)
        run_dispatch(report, modes, rng, progress)
        if compile_rows:
            run_compiles(report, compile_rows_for(workloads, modes), compile_repeat, progress)
    except KeyboardInterrupt:
        report["interrupted"] = True
    finally:
        progress.close()
    return report


def run_workload(report: dict, workload, sizes, modes, repeat: int, rng, progress) -> None:
    unavailable = workload_unavailable(workload)
    for size in (sizes if workload.sized else sizes[-1:]):
        label = size if workload.sized else "fixed"
        if unavailable:
            report["rows"].extend(Row(workload.name, label, mode, "skipped", unavailable).__dict__ for mode in modes)
            continue
        try:
            args = workload.make(SIZES[size], rng)
            result = workload.function(NumpyOps(), *args)
            result = tuple(np.asarray(leaf) for leaf in result) if isinstance(result, tuple) else np.asarray(result)
        except Exception as error:                 # the numpy reference failed: no mode can be checked
            detail = f"the numpy reference failed: {type(error).__name__}: {error}"[:200]
            report["rows"].extend(Row(workload.name, label, mode, "error", detail).__dict__ for mode in modes)
            continue
        expected = tuple(leaf.astype(np.float64) for leaf in result) if isinstance(result, tuple) else \
            result.astype(np.float64)
        if workload.elementwise:
            report["bounds_s"][f"{workload.name}@{label}"] = bytes_moved(args, result) / report["bandwidth_bytes_per_s"]
            if "gpu_bounds_s" in report:
                report["gpu_bounds_s"][f"{workload.name}@{label}"] = (bytes_moved(args, result)
                                                                      / report["gpu_bandwidth_bytes_per_s"])
        cells, cell_rows = [], []
        for mode in modes:
            progress(f"{workload.name} {label} {mode}: first call and check")
            row = Row(workload.name, label, mode)
            call = open_cell(row, lambda: make_callable(mode, workload, args),
                             lambda call: prepare(row, call, expected, workload.dtype))
            if call is not None:
                cells.append((row, call))
            cell_rows.append(row)
            progress.step()
        progress(f"{workload.name} {label}: {repeat} timed rounds of {len(cells)} modes")
        time_interleaved(cells, repeat)
        del cells
        report["rows"].extend(row.__dict__ for row in cell_rows)


def open_cell(row: Row, make, ready):
    """One cell's callable (``make()``) once ``ready(call)`` has called and checked it, or None
    with the row saying why: a missing peer or a workload a mode cannot run is skipped, a mode
    that fails is an error -- reported, never fatal."""
    reason = available(row.mode)
    if reason:
        row.status, row.detail = "skipped", reason
        return None
    try:
        call = make()
        return call if ready(call) else None
    except LookupError as error:
        row.status, row.detail = "skipped", str(error)
    except Exception as error:
        row.status, row.detail = "error", f"{type(error).__name__}: {error}"[:200]
    return None


def run_dispatch(report: dict, modes, rng, progress) -> None:
    chain = WORKLOADS["chain"]
    small = chain.make(16, rng)
    expected = np.asarray(chain.function(NumpyOps(), *small), dtype=np.float64)
    for mode in modes:
        progress(f"dispatch, 16 elements, {mode}")
        row = Row("dispatch", "16", mode)

        def time_dispatch(call, row=row) -> bool:
            measure(row, call, expected, "float32", 3)
            if row.status == "ok":
                start = time.perf_counter()
                for _ in range(2000):
                    call()
                row.median_s = (time.perf_counter() - start) / 2000
            return False                                # timed here, nothing left to time
        open_cell(row, lambda: make_callable(mode, chain, small), time_dispatch)
        report["dispatch"].append(row.__dict__)
        progress.step()


def run_compiles(report: dict, names: list[str], compile_repeat: int, progress) -> None:
    # An installed package has its bytecode compiled (pip does it at install); an
    # editable one run with PYTHONDONTWRITEBYTECODE=1, as here, would recompile every
    # module in every fresh process (~50 ms) and time that instead of flowjit.
    import compileall
    compileall.compile_dir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), quiet=1)
    for name in names:
        progress(f"first call in fresh processes, {name}")
        # Medians over fresh processes: each empty-cache one gets its own directory; the
        # warm-cache ones share the one the first of them filled.
        with contextlib.ExitStack() as stack:
            directories = [stack.enter_context(tempfile.TemporaryDirectory()) for _ in range(compile_repeat)]
            cold = [compile_time(name, directory) for directory in directories]
            warm = [compile_time(name, directories[0]) for _ in range(compile_repeat)]
        row = {"workload": name}
        for label, runs in (("empty_cache", cold), ("warm_cache", warm)):
            row[f"{label}_s"] = statistics.median(first for first, _, _ in runs)
            row[f"{label}_times_s"] = [first for first, _, _ in runs]
            row[f"{label}_exit_s"] = statistics.median(end for _, end, _ in runs)
            row[f"{label}_call_s"] = statistics.median(call for _, _, call in runs)
        report["compile"].append(row)
        progress.step()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--compile-scaling"]:     # compile time and memory against program size
        from flowjit.bench.pipeline_scaling import main as scaling_main
        return scaling_main(["--compile"] + argv[1:])
    suite = argparse.ArgumentParser(add_help=False)
    suite.add_argument("--suite", choices=("workloads", "programs"), default="workloads")
    chosen, rest = suite.parse_known_args(argv)
    if chosen.suite == "programs":           # the program corpus against numpy, jax.jit, torch.compile
        from flowjit.bench.program_suite import main as programs_main
        return programs_main(rest)
    argv = rest
    epilog = ("workloads:\n" + "".join(f"  {name:<14}{workload.about}\n" for name, workload in WORKLOADS.items())
              + "\nflowjit bench --compile-scaling [--sizes 100,1000,10000] [--program chain|tanh|tree] "
                "[--uncapped] [--json PATH]:\n  compile time, ms per op and peak memory against program size\n"
              "\nflowjit bench --suite programs [--programs NAMES|DOMAINS] [--sizes 4M] [--json PATH] [--list]:\n"
              "  the program corpus (flowjit/bench/programs/) checked against numpy, then timed against numpy,\n"
              "  jax.jit and torch.compile (flowjit bench --suite programs --help for its flags)\n")
    parser = argparse.ArgumentParser(prog="flowjit bench", description=__doc__, epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="sizes 64K and 1M instead of 1M and 16M")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, among those listed below (default: all)")
    parser.add_argument("--sizes", help=f"elements per workload, comma-separated among {', '.join(SIZES)} "
                                        f"(default: 1M,16M)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help=f"comma-separated among {', '.join(MODES + EXTRA_MODES)} (default: all but "
                             f"{', '.join(EXTRA_MODES)})")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per cell, median reported (>= 7); "
                        "the modes of a workload take turns, one call each per round")
    parser.add_argument("--compile-repeat", type=int, default=3,
                        help="fresh processes per compile row, median reported")
    parser.add_argument("--no-compile-rows", action="store_true",
                        help="skip the first-call rows (fresh processes, empty and warm kernel cache)")
    parser.add_argument("--json", metavar="PATH", help="write every figure and the machine description")
    parser.add_argument("--plot", metavar="PATH.png", help="bar chart of speedups over numpy")
    args = parser.parse_args(argv)
    sizes = args.sizes.split(",") if args.sizes else (["64K", "1M"] if args.quick else ["1M", "16M"])
    workloads, modes = args.workloads.split(","), args.modes.split(",")
    for name in workloads:
        if name not in WORKLOADS:
            parser.error(f"unknown workload '{name}' (workloads: {', '.join(WORKLOADS)})")
    for mode in modes:
        if mode not in MODES + EXTRA_MODES:
            parser.error(f"unknown mode '{mode}' (modes: {', '.join(MODES + EXTRA_MODES)})")
    for size in sizes:
        if size not in SIZES:
            parser.error(f"unknown size '{size}' (sizes: {', '.join(SIZES)})")
    report = run(workloads, sizes, modes, max(1, args.repeat), progress=Progress(sys.stderr),
                 compile_rows=not args.no_compile_rows, compile_repeat=max(1, args.compile_repeat))
    print(format_table(report, modes))
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(report, stream, indent=2, default=str)
        print(f"wrote {args.json}")
    if args.plot:
        print(plot(report, modes, args.plot))
    return 130 if report["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
