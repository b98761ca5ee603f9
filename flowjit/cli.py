"""The ``flowjit`` command line: look inside every stage, place and profile, benchmark,
manage the cache."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
import sys

from flowjit.errors import ArgumentError, FlowjitError


class CliError(FlowjitError):
    pass


def load_function(target: str):
    """``FILE.py:FUNC`` -> the function (a plain function or one already jitted)."""
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise CliError(f"'{target}' is not FILE.py:FUNC")
    if not os.path.exists(path):
        raise CliError(f"no such file: {path}")
    module_name = "_flowjit_user_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    try:
        return getattr(module, name)
    except AttributeError:
        functions = sorted(k for k, v in vars(module).items() if callable(v) and not k.startswith("_"))
        raise CliError(f"{path} has no function '{name}' (it has: {', '.join(functions)})") from None


def parse_arguments(function, specs: list[str], statics: list[str]):
    """``--arg x=f32[4,8]`` (or positional ``f32[4,8]``) -> positional and keyword arguments."""
    from flowjit.frontend.jit import ShapeDtype
    positional, keywords = [], {}
    for spec in specs:
        name, sep, type_text = spec.partition("=")
        if not sep:
            name, type_text = None, spec
        try:
            value = ShapeDtype.parse(type_text)
        except ValueError as error:
            raise CliError(f"--arg {spec}: {error}") from None
        if name is None:
            positional.append(value)
        else:
            _check_parameter(function, name, f"--arg {spec}")
            keywords[name] = value
    for spec in statics:
        name, sep, literal = spec.partition("=")
        if not sep:
            raise CliError(f"--static {spec}: expected NAME=VALUE")
        _check_parameter(function, name, f"--static {spec}")
        try:
            keywords[name] = ast.literal_eval(literal)
        except (ValueError, SyntaxError):
            raise CliError(f"--static {spec}: {literal!r} is not a Python literal") from None
    return positional, keywords


def _check_parameter(function, name: str, given: str) -> None:
    """A named argument must name one of the function's parameters (unless it takes **kwargs)."""
    import inspect
    parameters = inspect.signature(function).parameters
    if name not in parameters and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        function_name = getattr(function, "__name__", "the function")
        raise CliError(f"{given}: {function_name} has no parameter '{name}' (its parameters: "
                       f"{', '.join(parameters) or 'none'})")


def _jitted(function, statics, options):
    from flowjit.frontend.jit import Jitted, jit
    if isinstance(function, Jitted):
        return jit(function.fun, static_argnames=tuple(function.static_names) + tuple(statics),
                   options=options)
    return jit(function, static_argnames=tuple(statics), options=options)


def _with_gradient(function, argnums_text: str, positional, keywords, statics):
    """``--grad 0,1``: the function as ``flowjit.value_and_grad(function, argnums)``, its
    arguments given by position so that the differentiated ones can be found."""
    import inspect
    from flowjit.frontend.grad import value_and_grad
    from flowjit.frontend.jit import Jitted
    if isinstance(function, Jitted):
        function = function.fun
    try:
        argnums = tuple(int(part) for part in argnums_text.split(","))
    except ValueError:
        raise CliError(f"--grad {argnums_text}: expected argument positions, e.g. 0 or 0,1") from None
    signature = inspect.signature(function)
    try:
        bound = signature.bind_partial(*positional, **{k: v for k, v in keywords.items() if k not in statics})
    except TypeError as error:
        raise CliError(f"--grad: {error}") from None
    count = len(bound.args)
    for number in argnums:
        if not -count <= number < count:
            raise CliError(f"--grad {argnums_text}: argument {number} is not given (give the first {number + 1} "
                           f"arguments with --arg)")
    static_keywords = {k: v for k, v in keywords.items() if k in statics}
    return value_and_grad(function, argnums if len(argnums) > 1 else argnums[0]), list(bound.args), \
        {**bound.kwargs, **static_keywords}


def command_dump(args) -> int:
    from flowjit.compiler.ir.export import to_dot, to_json
    from flowjit.config import options_from_env
    function = load_function(args.target)
    statics = [spec.partition("=")[0] for spec in args.static]
    options = options_from_env().replace(**_pipeline_options(args))
    positional, keywords = parse_arguments(function, args.arg, args.static)
    if args.grad is not None:
        function, positional, keywords = _with_gradient(function, args.grad, positional, keywords, statics)
    lowered = _jitted(function, statics, options).lower(*positional, **keywords)
    if args.stage is None:
        args.stage = "fused" if args.explain_fusion else "traced"
    if args.stage not in lowered.stages:
        raise CliError(f"unknown stage '{args.stage}' (stages: {', '.join(lowered.stages)})")
    if args.explain_fusion and args.stage not in ("fused", "kernels"):
        raise CliError(f"--explain-fusion names kernels, which stage '{args.stage}' does not have: use it with "
                       f"--stage fused (its default) or --stage kernels")
    if args.parallel and args.stage != "kernels":
        raise CliError("--parallel shows the kernels' parallel variants: use it with --stage kernels")
    if args.stage in ("kernels", "partitioned") and args.format == "json":
        raise CliError(f"--stage {args.stage} is {'Python source' if args.stage == 'kernels' else 'one graph per device'}: "
                       f"use --format text, dot, svg or png")
    picture = args.format in PICTURES
    if picture:
        dot = graphviz_dot(args.format)
    if args.format in ("dot",) + PICTURES:
        # kernels draw as the fused stage does: a cluster per kernel with the nodes it runs
        graphs = lowered.stage_graphs("fused" if args.stage == "kernels" else args.stage)
        text = to_dot(graphs, title=f"{graphs[0].name} ({args.stage})")
    elif args.format == "json":
        text = to_json(lowered.stage_graph(args.stage))
    else:
        text = lowered.as_text(stage=args.stage, parallel=args.parallel)
    if args.dump_dir:                         # the pipeline writes them as it runs: make sure it ran
        records = lowered.pass_records
        files = [f"{index:02d}-{record.name}.fj" for index, record in enumerate(records, 1)]
        print(f"wrote the IR after each of {len(files)} passes to {os.path.join(args.dump_dir, '')} "
              f"({files[0]} ... {files[-1]})" if files else f"wrote nothing to {args.dump_dir}: no pass ran",
              file=sys.stderr)
    if args.after:
        text = _pipeline_report(lowered, args)
    else:
        _pipeline_report(lowered, args)
    notes = ""
    if args.stage in ("placed", "partitioned", "fused", "kernels"):
        notes = "".join(f"# {note}\n" for note in lowered.placement_notes())
    if args.stage in ("partitioned", "fused") and lowered.multi_device:
        notes += _partitions_by_task(lowered.stage_graphs(args.stage))
    explanation = ""
    if args.explain_fusion:
        reasons = lowered.explain_fusion()
        explanation = "# fusion boundaries (producer -> consumer: why they are in different kernels)\n"
        explanation += "".join(f"#   {reason}\n" for reason in reasons) or "#   none: every edge is inside a kernel\n"
    if picture:
        path = args.output or f"{lowered.graph.name}-{args.stage}.{args.format}"
        render(dot, text, args.format, path)
        sys.stdout.write(notes + explanation)
        print(f"wrote {args.format} of stage '{args.stage}' to {path}", file=sys.stderr)
        return 0
    if args.format == "dot":                  # DOT's comments are //
        notes, explanation = (re.sub(r"(?m)^# ", "// ", part) for part in (notes, explanation))
    text = notes + text + explanation
    if args.output:
        with open(args.output, "w") as handle:
            handle.write(text)
        print(f"wrote {args.format} of stage '{args.stage}' to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


PICTURES = ("svg", "png")


def _partitions_by_task(graphs) -> str:
    """``# task /job:ps/task:0: cpu:0 (3 nodes)``, a line per task, when the graphs span tasks."""
    from flowjit.devices import DeviceSpec
    by_task: dict[str, list[str]] = {}
    for graph in graphs:
        spec = DeviceSpec.parse(graph.attrs["device"])
        by_task.setdefault(f"/job:{spec.job}/task:{spec.task}", []).append(
            f"{spec.type}:{spec.index} ({len(graph.nodes)} nodes)")
    if len(by_task) < 2:
        return ""
    return "".join(f"# task {task}: {', '.join(parts)}\n" for task, parts in by_task.items())


def graphviz_dot(fmt: str) -> str:
    """The path of Graphviz's ``dot``, or an error that says how to get it."""
    import shutil
    dot = shutil.which("dot")
    if dot is None:
        raise CliError(f"--format {fmt} draws the graph with Graphviz's `dot`, which is not on PATH: install "
                       f"Graphviz (apt-get install graphviz, brew install graphviz or conda install graphviz), or "
                       f"write --format dot and render it elsewhere")
    return dot


def render(dot: str, text: str, fmt: str, path: str) -> None:
    """``dot -T{fmt}`` into ``path``, atomically (a failed run leaves no half-written file)."""
    import subprocess
    import tempfile
    directory = os.path.dirname(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(dir=directory, prefix=".flowjit-", suffix=f".{fmt}")
    os.close(descriptor)
    try:
        try:
            result = subprocess.run([dot, f"-T{fmt}", "-o", temporary], input=text, capture_output=True,
                                    text=True, timeout=120)
        except subprocess.TimeoutExpired:
            raise CliError(f"Graphviz's dot did not draw {path} within 120 s; try --format dot") from None
        if result.returncode != 0:
            raise CliError(f"Graphviz's dot failed on the graph: {result.stderr.strip()[:500]}")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)       # mkstemp made it private; a picture is as any file
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _pipeline_options(args) -> dict:
    fields = _device_options(args)
    if getattr(args, "fuse", True) is False:
        fields["fuse"] = False
    for name in ("after", "dump_dir", "passes", "fastmath"):
        value = getattr(args, name, None)
        if value:
            key = {"after": "dump_after"}.get(name, name)
            fields[key] = tuple(value.split(",")) if name == "passes" else value
    return fields


def _gpus_need_a_cluster(args, cluster: str) -> None:
    if getattr(args, "gpus", None) and not (getattr(args, cluster, None) or getattr(args, "address", None)):
        raise CliError("--gpus gives the tasks of --cluster their GPUs: give --cluster too")


def _add_gpus_flag(parser) -> None:
    parser.add_argument("--gpus", metavar="JOB=N,...", help="with --cluster: the GPUs each task of these jobs (or "
                                                            "tasks) owns, e.g. worker=1, or 1 for every task "
                                                            "(default: none)")


def _device_options(args) -> dict:
    _gpus_need_a_cluster(args, "plan_cluster")
    fields = {}
    if getattr(args, "devices", None):
        fields["devices"] = _device_set(args.devices)
    if getattr(args, "plan_cluster", None):
        if getattr(args, "devices", None):
            raise CliError("--cluster and --devices both name the devices to place on: give one")
        from flowjit.runtime.cluster_spec import ClusterError, planned_devices
        try:
            fields["devices"] = planned_devices(args.plan_cluster, gpus=getattr(args, "gpus", None))
        except ClusterError as error:
            raise CliError(f"--cluster {args.plan_cluster}: {error}") from None
    if getattr(args, "soft_placement", False):
        fields["soft_placement"] = True
    if getattr(args, "lossy_transfers", False):
        fields["lossy_transfers"] = True
    return fields


def _device_set(text: str):
    from flowjit.devices import DeviceSet
    return DeviceSet.parse(text)


def _add_device_flags(parser) -> None:
    parser.add_argument("--devices", metavar="D1,D2",
                        help="place on these devices, e.g. cpu:0,cpu:1 or cpu:0,gpu:0 (a gpu is described "
                             "for planning: it cannot run here); cpu:1x2 gives cpu:1 two threads")
    parser.add_argument("--soft-placement", action="store_true",
                        help="fall back, and report it, when a device request cannot be met")
    parser.add_argument("--lossy-transfers", action="store_true",
                        help="send float32 across devices as its upper 16 bits")


def command_devices(args) -> int:
    from flowjit.config import cache_directory
    from flowjit.devices import current_devices
    from flowjit.machine import cache_path, machine_figures
    _gpus_need_a_cluster(args, "cluster")
    if args.cluster or args.address:
        from flowjit.runtime.cluster import Cluster
        with Cluster(args.cluster or {"worker": 1}, address=args.address, gpus=args.gpus) as cluster:
            print(cluster.describe())
        return 0
    devices = _device_set(args.devices) if args.devices else current_devices()
    directory = cache_directory("default")
    machine = machine_figures(directory)
    print(devices.describe(machine))
    if any(device.bandwidth is None for device in devices):
        where = (f"read from {cache_path(directory)}" if machine.source == "cached"
                 else f"cached in {cache_path(directory)}" if directory else "the disk cache is off")
        print(f"* measured on this machine's CPU on {machine.measured_at} in {machine.seconds:.1f} s ({where}): "
              f"one thread's memory bandwidth, BLAS matmul FLOP rate, a compiled kernel's call cost")
    from flowjit.devices import local_gpu_figures
    from flowjit.gpu_figures import describe
    for device in devices:
        figures = local_gpu_figures(device.spec) if device.type == "gpu" and device.executable else None
        if figures is not None:
            print(f"{device.short}: {describe(figures)}")
    if any(not device.executable for device in devices):
        print("devices that do not run here have static figures, for planning")
    return 0


def command_profile(args) -> int:
    _gpus_need_a_cluster(args, "run_cluster")
    if args.run_cluster:
        if args.devices:
            raise CliError("--cluster and --devices both name the devices to run on: give one")
        from flowjit.runtime.cluster import Cluster
        with Cluster(args.run_cluster, gpus=args.gpus) as cluster:
            return _profile(args, cluster)
    return _profile(args, None)


def _profile(args, cluster) -> int:
    import numpy as np
    from flowjit.config import options_from_env
    function = load_function(args.target)
    statics = [spec.partition("=")[0] for spec in args.static]
    options = options_from_env().replace(**_device_options(args))
    if cluster is not None:
        options = options.replace(devices=cluster)
    positional, keywords = parse_arguments(function, args.arg, args.static)
    rng = np.random.default_rng(args.seed)

    def array(spec):
        if not hasattr(spec, "shape"):
            return spec
        if np.issubdtype(spec.dtype, np.floating):
            return rng.standard_normal(spec.shape).astype(spec.dtype)
        if spec.dtype == np.bool_:
            return rng.random(spec.shape) < 0.5
        return rng.integers(0, 10, spec.shape).astype(spec.dtype)
    jitted = _jitted(function, statics, options)
    _, trace = jitted.profile(*[array(a) for a in positional], path=args.output,
                              **{k: array(v) for k, v in keywords.items()})
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    flows = sum(1 for e in trace["traceEvents"] if e["ph"] == "s")
    busy: dict[tuple, float] = {}
    for span in spans:
        busy[span["pid"], span["tid"]] = busy.get((span["pid"], span["tid"]), 0.0) + span["dur"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    processes = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "process_name"}
    print(f"wrote {args.output}: {len(spans)} spans, {flows} transfers (open it in https://ui.perfetto.dev)")
    for (pid, tid), name in sorted(names.items()):
        where = f"{processes[pid]}: " if cluster is not None else ""
        print(f"  {where}{name}: busy {busy.get((pid, tid), 0.0):.1f} µs")
    return 0


def _pipeline_report(lowered, args) -> str:
    """With --after: the IR after each matching pass, each under a comment saying what it did."""
    if args.timings:
        print(lowered.pass_report(), file=sys.stderr)
    if not args.after:
        return ""
    parts = []
    for record in lowered.pass_records:
        if record.text is None or not re.search(args.after, record.name):
            continue
        parts.append(f"# after pass '{record.name}' (iteration {record.iteration}): "
                     f"{record.nodes_before} -> {record.nodes_after} nodes, {record.seconds * 1e3:.2f} ms\n"
                     + record.text)
    return "".join(parts)


TARGET_HELP = ("FILE.py:FUNC names a function in a Python file, e.g. examples/models.py:softmax: the file is "
               "run as a module (its own imports resolve next to it) and FUNC is a plain function or one "
               "already decorated with @flowjit.jit (its static arguments are kept).")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="flowjit",
        description="flowjit: a JIT compiler from numpy functions to fused kernels. "
                    "Each subcommand inspects or runs one part of the pipeline.",
        epilog=TARGET_HELP + "  `flowjit COMMAND --help` describes a command's flags.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    dump = commands.add_parser(
        "dump", help="print the IR of a function at a stage of the pipeline",
        description="Trace FILE.py:FUNC for the given argument types and print its IR.",
        epilog="example: flowjit dump model.py:predict --arg x=f32[64,784] --arg w=f32[784,10]")
    dump.add_argument("target", metavar="FILE.py:FUNC", help=TARGET_HELP)
    dump.add_argument("--arg", action="append", default=[], metavar="NAME=TYPE",
                      help="an array argument's type, e.g. x=f32[64,784] (repeat per argument; "
                           "without NAME= it is positional)")
    dump.add_argument("--static", action="append", default=[], metavar="NAME=VALUE",
                      help="a static (compile-time) argument given as a Python literal, e.g. n=3")
    dump.add_argument("--stage", default=None,
                      help="traced, optimized (after the passes), placed (a device per node), partitioned "
                           "(a graph per device, with send/recv), fused (kernels as fused nodes) or kernels "
                           "(a one-line summary, then each kernel's generated Numba source with the helpers it "
                           "uses) (default: traced; fused with --explain-fusion)")
    dump.add_argument("--parallel", action="store_true",
                      help="with --stage kernels: also show each kernel's parallel variant (its outer loop "
                           "under prange, for large inputs), as a diff against the serial one")
    dump.add_argument("--grad", nargs="?", const="0", metavar="ARGNUMS",
                      help="show value_and_grad of the function (a scalar loss) with respect to these arguments "
                           "(positions, default 0): the forward graph extended backwards")
    dump.add_argument("--explain-fusion", action="store_true",
                      help="after the fused IR (or the kernels), say for each edge between kernels why it was "
                           "not fused, in the names that IR prints")
    dump.add_argument("--no-fuse", dest="fuse", action="store_false",
                      help="one kernel per op (the unfused baseline)")
    dump.add_argument("--format", choices=("text", "dot", "json", "svg", "png"), default="text",
                      help="text (parses back), json, dot (Graphviz: a cluster per device and per kernel, nodes "
                           "coloured by op kind, transfers dashed), or svg / png drawn from it by Graphviz's "
                           "`dot` (apt-get install graphviz) (default: text)")
    dump.add_argument("-o", "--output", metavar="PATH", help="write to PATH instead of standard output (svg and "
                                                             "png: default FUNC-STAGE.svg / .png)")
    dump.add_argument("--after", metavar="REGEX",
                      help="print the IR after every pass whose name matches REGEX ('.' for all), "
                           "each under a comment with its node counts and time")
    dump.add_argument("--dump-dir", metavar="DIR", help="write the IR after each pass to DIR, one file "
                                                        "per pass in run order (01-prune.fj, ...)")
    dump.add_argument("--passes", metavar="P1,P2", help="run these passes instead of the default pipeline "
                                                        "(prune, simplify, constant-powers, concat-regions, fold-constants, cse, dce)")
    dump.add_argument("--fastmath", action="store_true",
                      help="allow rewrites that change rounding or NaN behaviour (x*0 -> 0, ...)")
    dump.add_argument("--timings", action="store_true", help="print each pass's node counts and time "
                                                             "to standard error")
    _add_device_flags(dump)
    dump.add_argument("--cluster", dest="plan_cluster", metavar="JOB=N,...",
                      help="place on the devices of a cluster of these tasks (e.g. ps=1,worker=2), as "
                           "flowjit.Cluster would, without starting it: --stage partitioned shows one graph per "
                           "task and device")
    _add_gpus_flag(dump)
    dump.set_defaults(handler=command_dump)

    devices = commands.add_parser("devices", help="list the devices placement can use",
                                  description="The session's device set (one CPU with every core unless "
                                              "set), or the one --devices describes, with the figures the "
                                              "cost model places by: a CPU's measured on this machine once "
                                              "(about a second) and cached in the kernel cache directory.")
    devices.add_argument("--devices", metavar="D1,D2", help="describe this set instead, e.g. cpu:0,cpu:1,gpu:0")
    devices.add_argument("--cluster", metavar="JOB=N,...", help="start these tasks (e.g. ps=1,worker=2) on a local "
                                                                "Ray cluster, or on --address, list each task's "
                                                                "process and devices, then stop them")
    devices.add_argument("--address", metavar="RAY", help="the Ray cluster to start the --cluster tasks on "
                                                          "(host:port or ray://host:port; default: $RAY_ADDRESS, "
                                                          "else a local one, loopback only)")
    _add_gpus_flag(devices)
    devices.set_defaults(handler=command_devices)

    profile = commands.add_parser(
        "profile", help="run a function once and write a Chrome-trace timeline of its kernels",
        description="Run FILE.py:FUNC on random arrays of the given types on the multi-device executor "
                    "and write Chrome-trace JSON: one track per device, a span per kernel, an arrow per "
                    "send -> recv.",
        epilog="example: flowjit profile model.py:predict --arg x=f32[64,784] --devices cpu:0,cpu:1 -o trace.json")
    profile.add_argument("target", metavar="FILE.py:FUNC", help=TARGET_HELP)
    profile.add_argument("--cluster", dest="run_cluster", metavar="JOB=N,...",
                         help="run on a local Ray cluster of these tasks (e.g. ps=1,worker=2; started, then "
                              "stopped): one trace with a process per task, their clocks aligned")
    _add_gpus_flag(profile)
    profile.add_argument("--arg", action="append", default=[], metavar="NAME=TYPE",
                         help="an array argument's type, e.g. x=f32[64,784], filled with standard normal "
                              "values (integers 0-9, booleans at random); repeat per argument, without "
                              "NAME= it is positional")
    profile.add_argument("--static", action="append", default=[], metavar="NAME=VALUE",
                         help="a static (compile-time) argument given as a Python literal, e.g. n=3")
    profile.add_argument("-o", "--output", default="trace.json", metavar="PATH",
                         help="where to write the trace (default: trace.json)")
    profile.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    _add_device_flags(profile)
    profile.set_defaults(handler=command_profile)

    bench = commands.add_parser("bench", help="benchmark fused vs unfused vs numpy and its peers",
                                add_help=False, description="Run `flowjit bench --help` for its flags.")
    bench.add_argument("rest", nargs=argparse.REMAINDER)
    bench.set_defaults(handler=lambda args: _bench(args.rest))

    cache = commands.add_parser("cache", help="show or clear the on-disk kernel cache",
                                description="The kernel cache lives in FLOWJIT_CACHE_DIR (default "
                                            "~/.cache/flowjit; 'none' keeps kernels in memory only).",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="actions:\n  info   where it is, how many kernels, its size on disk "
                                       "(what du -s counts) and its file contents (du -s --apparent-size)\n"
                                       "  clear  delete every kernel, and the directories left empty")
    cache.add_argument("action", nargs="?", choices=("info", "clear"), help="info or clear (below)")
    cache.set_defaults(handler=command_cache, cache_help=cache.format_help)

    from flowjit.cli_checkpoint import add_checkpoint_parser
    add_checkpoint_parser(commands)
    return parser


def _bench(rest: list[str]) -> int:
    from flowjit.bench.harness import main as bench_main
    return bench_main(rest)


def command_cache(args) -> int:
    from flowjit.compiler.codegen.cache import kernel_cache
    from flowjit.config import cache_directory
    if args.action is None:
        print(args.cache_help(), end="")
        return 0
    directory = cache_directory("default")
    if directory is None:
        print("the disk cache is off (FLOWJIT_CACHE_DIR=none)")
        return 0
    cache = kernel_cache(directory)
    if cache.directory is None:                       # it warned why
        print(f"flowjit cache: error: {directory} cannot be used as the kernel cache", file=sys.stderr)
        return 1
    if args.action == "clear":
        try:
            print(f"removed {cache.clear()} files from {cache.directory}")
        except OSError as error:
            print(f"flowjit cache: error: cannot clear {cache.directory}: {error}", file=sys.stderr)
            return 1
    else:
        info = cache.info()
        print(f"directory: {info['directory']}\nkernels:   {info['entries']}\n"
              f"on disk:   {_size(info['bytes_on_disk'])}: the blocks allocated, as du -s counts\n"
              f"contents:  {_size(info['bytes'])}: file and directory lengths, as du -s --apparent-size counts")
    return 0


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MiB ({count} bytes)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:                 # the harness parses its own flags (and --help)
        return _bench(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except ArgumentError as error:
        print(f"flowjit {args.command}: error: {error.message}", file=sys.stderr)
        return 1
    except FlowjitError as error:
        print(f"flowjit {args.command}: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
