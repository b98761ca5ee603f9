"""The package's layers import only downwards:

    errors, counters, config, devices, machine, files, gpu, gpu_figures, progress   (what every layer shares)
    compiler.ir        the IR, its ops and their meaning
    compiler.passes    rewrites of the IR (and the cost model placement uses)
    compiler.codegen   kernel plans -> source -> compiled callables
    runtime            runs compiled callables: never generates code, never runs passes
    compiler.lowered   the compiler driver: trace -> passes -> codegen -> runtime (and
                       compiler.listing, which prints its kernels stage)
    frontend           tracing, jit, the numpy API
    optim, train       optimisers and the training loop (on variables, grad and checkpoints)
    flowjit            the public package
    cli                the command line, and the bench harness (tools on the public package)

Every import counts, at module level or inside a function.
"""

import ast
import pathlib

import flowjit

ROOT = pathlib.Path(flowjit.__file__).parent

SHARED = {"errors", "counters", "config", "devices", "machine", "files", "gpu", "gpu_figures", "progress"}
ORDER = ["shared", "ir", "passes", "codegen", "runtime", "lowered", "frontend", "training", "package", "cli"]


def layer(module: str) -> str:
    parts = module.split(".")[1:]                 # without "flowjit"
    if not parts:
        return "package"
    if parts[0] in SHARED:
        return "shared"
    if parts[0] == "compiler":
        if len(parts) == 1 or parts[1] in ("lowered", "listing"):
            return "lowered"
        if parts[1] == "costmodel":
            return "passes"
        return parts[1]
    if parts[0] == "bench" or parts[0].startswith("cli_"):
        return "cli"
    if parts[0] in ("optim", "train"):
        return "training"
    return parts[0]


def imports():
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(("flowjit",) + path.relative_to(ROOT).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                if target == "flowjit" or target.startswith("flowjit."):
                    yield module, target, f"{path.relative_to(ROOT.parent)}:{node.lineno}"


def test_every_layer_imports_only_the_layers_below_it():
    assert len(list(imports())) > 100                  # the scan sees the package
    upward = []
    for module, target, where in imports():
        source, destination = layer(module), layer(target)
        if source == "shared" and destination == "shared":
            continue
        if ORDER.index(destination) > ORDER.index(source):
            upward.append(f"{where}: {module} ({source}) imports {target} ({destination})")
    assert not upward, "imports against the layering:\n" + "\n".join(upward)


def test_the_runtime_never_imports_codegen_and_codegen_never_imports_passes():
    pairs = {(layer(module), layer(target)) for module, target, _ in imports()}
    assert ("runtime", "codegen") not in pairs
    assert ("codegen", "passes") not in pairs
    assert ("ir", "runtime") not in pairs
