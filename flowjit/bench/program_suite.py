"""flowjit bench --suite programs: the program corpus (flowjit/bench/programs/) against numpy,
jax.jit and torch.compile.

Each program runs unchanged in every mode: numpy calls it, flowjit jits it, jax.jit runs it
with ``np`` (and scipy.special's functions) bound to jax's, and torch.compile compiles the
numpy code itself (torch traces numpy calls).  Each result is checked against numpy before
it is timed, with the harness's check (integers and booleans exact; floats within 1e-9 of the
largest magnitude for float64 programs, 2e-4 where the program computes in float32 anywhere),
and the timed calls take turns across modes as the harness's do.  A peer outside that
tolerance but within 2e-4 is still timed and listed as inexact; flowjit is held to the
program's own tolerance.  A program flowjit does not trace is reported as unsupported with
the op it names, not timed; the suite goes on.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import types

import numpy as np

from flowjit.bench import harness
from flowjit.bench.harness import Progress, Row, prepare, time_interleaved, to_numpy
from flowjit.bench.report import skip_summary
from flowjit.bench.programs import PROGRAMS
from flowjit.errors import FlowjitError, InternalError

MODES = ("numpy", "fused", "unfused", "jax", "torch")
DEFAULT_MODES = ("numpy", "fused", "jax", "torch")
HEADINGS = {"numpy": "numpy", "fused": "flowjit", "unfused": "unfused", "jax": "jax", "torch": "torch"}
PEERS = ("jax", "torch")
STATUS = {"wrong": "WRONG", "error": "ERROR", "unsupported": "UNSUPP"}
SLOWER_THAN_JAX = 1.1


# -- the program in each mode ---------------------------------------------------------------------
def jax_version(function):
    """``function`` with the numpy module, scipy.special and its functions that it reaches
    through its module's globals bound to jax's, helpers of the same module rebound too."""
    import jax
    jax.config.update("jax_enable_x64", True)       # float64 programs stay float64, as in numpy
    import jax.numpy as jnp
    import jax.scipy.special as jax_special
    import scipy.special

    namespace = dict(function.__globals__)
    for name, value in function.__globals__.items():
        if value is np:
            namespace[name] = jnp
        elif value is scipy.special:
            namespace[name] = jax_special
        elif isinstance(value, np.ufunc) and getattr(scipy.special, getattr(value, "__name__", ""), None) is value:
            namespace[name] = getattr(jax_special, value.__name__)
    for name, value in function.__globals__.items():
        if isinstance(value, types.FunctionType) and value.__module__ == function.__module__:
            namespace[name] = types.FunctionType(value.__code__, namespace, value.__name__, value.__defaults__,
                                                 value.__closure__)
    return namespace[function.__name__]


def make_callable(mode: str, program, args):
    if mode == "numpy":
        return lambda: program.function(*args)
    if mode in ("fused", "unfused"):
        import flowjit
        jitted = flowjit.jit(program.function, fuse=(mode == "fused"))
        return lambda: jitted(*args)
    if mode == "jax":
        import jax
        device_args = [jax.device_put(a) for a in args]
        compiled = jax.jit(jax_version(program.function))
        return lambda: jax.block_until_ready(compiled(*device_args))
    if mode == "torch":
        import torch
        compiled = torch.compile(program.function)
        return lambda: compiled(*args)
    raise ValueError(mode)


def unsupported_op(error: FlowjitError) -> str:
    """What flowjit said it does not trace, without the location or the advice after it:
    ``np.cumsum``, ``np.dot of arrays with more than 2 dimensions``, ``x[...] = v on f64[3]``."""
    message = getattr(error, "message", None) or str(error)
    named = re.match(r"(.+?) (is|are) not supported", message)
    text = named.group(1) if named else message.split(";", 1)[0]
    return re.sub(r"\b([fiub]\d+)\[[\d,]*\]", r"\1[...]", text).strip()    # the same op at every size


def is_unsupported(error: BaseException) -> bool:
    """flowjit refused the program on purpose (not a crash inside flowjit)."""
    return isinstance(error, FlowjitError) and not isinstance(error, InternalError)


# -- sizes and tolerances -------------------------------------------------------------------------
def short_type(value) -> str:
    value = np.asarray(value)
    dims = ",".join(str(d) for d in value.shape)
    return f"{value.dtype.kind}{value.dtype.itemsize * 8}[{dims}]"


def leaves(tree) -> list:
    return [leaf for item in tree for leaf in leaves(item)] if isinstance(tree, tuple) else [tree]


def compute_dtype(args, expected) -> str | None:
    """The least precise float among the arguments and results (None: no floats at all)."""
    floats = [np.asarray(v).dtype for v in list(args) + leaves(expected) if np.asarray(v).dtype.kind == "f"]
    return min(floats, key=lambda d: d.itemsize).name if floats else None


# -- the run --------------------------------------------------------------------------------------
def run(names, sizes, modes, repeat: int, progress: Progress | None = None) -> dict:
    progress = progress if progress is not None else Progress(live=False)
    progress.start(len(names) * len(sizes) * len(modes))
    report = {"suite": "programs", "machine": harness.machine(), "sizes": list(sizes), "modes": list(modes),
              "programs": {}, "rows": [], "interrupted": False}
    try:
        for name in names:
            for size in sizes:
                run_program(report, PROGRAMS[name], size, modes, repeat, progress)
    except KeyboardInterrupt:
        report["interrupted"] = True
    finally:
        progress.close()
    report["summary"] = summarize(report)
    return report


def run_program(report: dict, program, size: str, modes, repeat: int, progress) -> None:
    args = program.arguments(harness.SIZES[size])
    info = report["programs"].setdefault(program.name, {"domain": program.domain, "about": program.about,
                                                         "arguments": {}})
    info["arguments"][size] = [short_type(a) for a in args]
    try:
        with np.errstate(all="ignore"):
            expected = to_numpy(program.function(*args))
    except Exception as error:                     # the numpy program itself failed: nothing to check
        detail = f"the numpy program failed: {type(error).__name__}: {error}"[:200]
        report["rows"].extend(Row(program.name, size, mode, "error", detail).__dict__ for mode in modes)
        progress.done += len(modes)
        return
    dtype = compute_dtype(args, expected)
    cells, rows = [], []
    for mode in modes:
        progress(f"{program.name} {size} {mode}: first call and check")
        row = Row(program.name, size, mode)
        reason = harness.available(mode)
        if reason:
            row.status, row.detail = "skipped", reason
        else:
            try:
                call = make_callable(mode, program, args)
                with np.errstate(all="ignore"):
                    if prepare(row, call, expected, dtype) or accept_inexact_peer(row, call, expected):
                        cells.append((row, call))
            except Exception as error:             # reported in the table, never fatal
                if mode in ("fused", "unfused") and is_unsupported(error):
                    row.status, row.detail = "unsupported", unsupported_op(error)
                else:
                    row.status, row.detail = "error", f"{type(error).__name__}: {error}"[:300]
        rows.append(row)
        progress.step()
    progress(f"{program.name} {size}: {repeat} timed rounds of {len(cells)} modes")
    with np.errstate(all="ignore"):
        time_interleaved(cells, repeat)
    report["rows"].extend(row.__dict__ for row in rows)


def accept_inexact_peer(row: Row, call, expected) -> bool:
    """A peer outside the program's tolerance but within float32's (2e-4 of the largest
    magnitude: jax's float64 erf, say) is still timed, its row saying how inexact it was;
    flowjit is held to the program's own tolerance."""
    if row.mode not in PEERS or row.status != "wrong":
        return False
    if harness.check(to_numpy(call()), expected, "float32") is not None:
        return False
    row.status, row.detail = "ok", f"inexact: {row.detail}"
    call()
    return True


def cells_of(report: dict) -> dict:
    """(program, size) -> {mode: row}, in the order measured."""
    table = {}
    for row in report["rows"]:
        table.setdefault((row["workload"], row["size"]), {})[row["mode"]] = row
    return table


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summarize(report: dict) -> dict:
    """Ratios of flowjit's time to each peer's, their geometric means per size, the programs
    slower than numpy and than 1.1x jax.jit, and the unsupported ops with their programs."""
    summary = {"ratios": {}, "geometric_means": {}, "slower_than_numpy": [], "slower_than_jax": [],
               "unsupported": {}, "failed": [], "inexact": []}
    for (name, size), cells in cells_of(report).items():
        fused = cells.get("fused")
        for mode, row in cells.items():
            if row["status"] == "unsupported":
                summary["unsupported"].setdefault(row["detail"], []).append(name)
            elif row["status"] == "ok" and row["detail"].startswith("inexact"):
                summary["inexact"].append({"program": name, "size": size, "mode": mode, "detail": row["detail"]})
            elif row["status"] in ("wrong", "error"):
                summary["failed"].append({"program": name, "size": size, "mode": mode, "status": row["status"],
                                          "detail": row["detail"]})
        if not fused or not fused["median_s"]:
            continue
        for mode, row in cells.items():
            if mode != "fused" and row["median_s"]:
                ratio = fused["median_s"] / row["median_s"]
                summary["ratios"].setdefault(size, {}).setdefault(mode, {})[name] = ratio
                if mode == "numpy" and ratio > 1.0:
                    summary["slower_than_numpy"].append({"program": name, "size": size, "ratio": ratio})
                if mode == "jax" and ratio > SLOWER_THAN_JAX:
                    summary["slower_than_jax"].append({"program": name, "size": size, "ratio": ratio})
    for size, by_mode in summary["ratios"].items():
        summary["geometric_means"][size] = {mode: {"value": geometric_mean(list(ratios.values())),
                                                   "programs": len(ratios)} for mode, ratios in by_mode.items()}
    summary["unsupported"] = {op: sorted(set(names)) for op, names in sorted(summary["unsupported"].items())}
    return summary


def format_table(report: dict) -> str:
    modes, summary = report["modes"], report["summary"]
    peers = [m for m in modes if m != "fused"]
    header = f"{'program':<24}{'size':>5}  {'largest argument':<18}" + "".join(f"{HEADINGS[m]:>10}" for m in modes)
    if "fused" in modes:
        header += "".join(f"{'fj/' + HEADINGS[m]:>11}" for m in peers)
    repeats = sorted({len(r["times_s"]) for r in report["rows"] if r["times_s"]})
    lines = [f"median ms per call ({'/'.join(map(str, repeats)) or 'no'} timed calls each, every result checked "
             f"against numpy first; fj/x: flowjit's time over x's, < 1: flowjit is faster)", header,
             "-" * len(header)]
    for (name, size), cells in cells_of(report).items():
        arguments = report["programs"][name]["arguments"][size]
        largest = max(arguments, key=lambda text: math.prod(int(d) for d in re.findall(r"\d+", text.split("[")[1])
                                                              or [1]))
        line = f"{name:<24}{size:>5}  {largest:<18}"
        for mode in modes:
            row = cells.get(mode)
            if row is None or row["status"] == "skipped":
                line += f"{'skipped':>10}"
            elif row["status"] != "ok" or row["median_s"] is None:
                line += f"{STATUS.get(row['status'], row['status'].upper()):>10}"
            else:
                line += f"{row['median_s'] * 1e3:>10.2f}"
        if "fused" in modes:
            for mode in peers:
                ratio = summary["ratios"].get(size, {}).get(mode, {}).get(name)
                line += f"{ratio:>11.2f}" if ratio is not None else f"{'-':>11}"
        lines.append(line)
    lines.append("")
    for size, means in summary["geometric_means"].items():
        lines.append(f"geometric mean of flowjit's time over each peer's at {size}: " + ", ".join(
            f"{HEADINGS[mode]} {mean['value']:.2f}x ({mean['programs']} programs)" for mode, mean in means.items()))
    if summary["slower_than_numpy"]:
        lines.append("slower than numpy: " + ", ".join(
            f"{s['program']}@{s['size']} {s['ratio']:.2f}x" for s in summary["slower_than_numpy"]))
    if summary["slower_than_jax"]:
        lines.append(f"slower than {SLOWER_THAN_JAX}x jax.jit: " + ", ".join(
            f"{s['program']}@{s['size']} {s['ratio']:.2f}x" for s in summary["slower_than_jax"]))
    if summary["unsupported"]:
        count = len({name for names in summary["unsupported"].values() for name in names})
        lines.append(f"unsupported by flowjit ({count} programs):")
        lines.extend(f"  {op}: {', '.join(names)}" for op, names in summary["unsupported"].items())
    lines.extend(skip_summary(report["rows"]))
    for note in summary["inexact"]:
        lines.append(f"timed though inexact: {note['program']}@{note['size']} {note['mode']}: {note['detail']}")
    for failure in summary["failed"]:
        lines.append(f"{failure['status'].upper()}: {failure['program']}@{failure['size']} {failure['mode']}: "
                     f"{failure['detail']}")
    if report.get("interrupted"):
        lines.append("interrupted: the figures above are those measured before the interrupt")
    return "\n".join(lines)


def select(text: str | None, parser) -> list[str]:
    """Program names, or domains standing for their programs, comma-separated (None: all)."""
    if not text:
        return list(PROGRAMS)
    names = []
    domains = {p.domain for p in PROGRAMS.values()}
    for item in text.split(","):
        if item in PROGRAMS:
            names.append(item)
        elif item in domains:
            names.extend(p.name for p in PROGRAMS.values() if p.domain == item)
        else:
            parser.error(f"unknown program or domain '{item}' (domains: {', '.join(sorted(domains))}; "
                         f"--list names the programs)")
    return list(dict.fromkeys(names))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = argparse.ArgumentParser(prog="flowjit bench --suite programs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", help="comma-separated program names or domains (default: all)")
    parser.add_argument("--sizes", default="4M", help=f"elements of each program's largest array (input or intermediate), comma-separated "
                                                      f"among {', '.join(harness.SIZES)} (default: 4M)")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES),
                        help=f"comma-separated among {', '.join(MODES)} (fused is flowjit's jit; "
                             f"default: {','.join(DEFAULT_MODES)})")
    parser.add_argument("--repeat", type=int, default=7, help="timed calls per cell, median reported; the "
                        "modes of a program take turns, one call each per round")
    parser.add_argument("--json", metavar="PATH", help="write every figure and the machine description")
    parser.add_argument("--list", action="store_true", help="list the programs by domain and exit")
    args = parser.parse_args(argv)
    if args.list:
        for program in sorted(PROGRAMS.values(), key=lambda p: (p.domain, p.name)):
            print(f"{program.domain:<11}{program.name:<24}{program.about}")
        return 0
    names, sizes, modes = select(args.programs, parser), args.sizes.split(","), args.modes.split(",")
    for size in sizes:
        if size not in harness.SIZES:
            parser.error(f"unknown size '{size}' (sizes: {', '.join(harness.SIZES)})")
    for mode in modes:
        if mode not in MODES:
            parser.error(f"unknown mode '{mode}' (modes: {', '.join(MODES)})")
    report = run(names, sizes, modes, max(1, args.repeat), progress=Progress(sys.stderr))
    print(format_table(report))
    if args.json:
        with open(args.json, "w") as stream:
            json.dump(report, stream, indent=2, default=str)
        print(f"wrote {args.json}")
    return 130 if report["interrupted"] else 0


if __name__ == "__main__":
    sys.exit(main())
