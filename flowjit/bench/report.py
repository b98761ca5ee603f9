"""flowjit bench's report: the table of a run, the one-line summary of what was skipped, and
the plot of speedups over numpy (harness.py measures; this prints)."""

from __future__ import annotations

import os


def install_hint() -> str:
    """How to get the bench extra: from a source checkout (an editable install, or the
    package run from the repository) with ``-e .``, else from the package index."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if os.path.exists(os.path.join(package_parent, "pyproject.toml")):
        return "pip install -e '.[bench]'"
    return "pip install 'flowjit[bench]'"


def gpu_ratios(report: dict, keys: list, modes) -> list[str]:
    """The GPU modes' lines: gpu-fused against each peer, fused over unfused, and over the bound."""
    if "gpu-fused" not in modes:
        return []
    lines = ["", "ratios of flowjit gpu-fused to each peer (< 1: flowjit is faster); gpu-unfused/gpu-fused; "
                 "gpu-fused over the GPU bound"]
    for workload, size in keys:
        cells = {r["mode"]: r for r in report["rows"] if r["workload"] == workload and r["size"] == size}
        fused = cells.get("gpu-fused")
        if not fused or not fused["median_s"]:
            continue
        ratios = [f"{mode} {fused['median_s'] / cells[mode]['median_s']:.2f}x" for mode in modes
                  if mode not in ("gpu-fused", "gpu-unfused", "numpy", "fused", "unfused")
                  and mode in cells and cells[mode]["median_s"]]
        unfused = cells.get("gpu-unfused")
        if unfused and unfused["median_s"]:
            ratios.append(f"unfused/fused {unfused['median_s'] / fused['median_s']:.1f}")
        bound = report.get("gpu_bounds_s", {}).get(f"{workload}@{size}")
        if bound:
            ratios.append(f"over bound {fused['median_s'] / bound:.2f} (bound {bound * 1e3:.3f} ms)")
        lines.append(f"  {workload:<14}{size:>6}  " + ", ".join(ratios))
    return lines


def format_table(report: dict, modes) -> str:
    rows = [r for r in report["rows"]]
    lines = []
    header = f"{'workload':<14}{'size':>6}  " + "".join(f"{m:>12}" for m in modes) + \
        f"{'bound':>10}{'fused/bound':>12}{'unfused/fused':>14}"
    repeats = {len(r["times_s"]) for r in rows if r["times_s"]}
    lines.append(f"median ms per call ({'/'.join(str(n) for n in sorted(repeats)) or 'no'} timed calls each, "
                 f"every result checked against numpy first)")
    lines.append(header)
    lines.append("-" * len(header))
    keys = []
    for r in rows:
        if (r["workload"], r["size"]) not in keys:
            keys.append((r["workload"], r["size"]))
    for workload, size in keys:
        cells = {r["mode"]: r for r in rows if r["workload"] == workload and r["size"] == size}
        line = f"{workload:<14}{size:>6}  "
        for mode in modes:
            cell = cells.get(mode)
            if cell is None or cell["status"] == "skipped":
                line += f"{'skipped':>12}"
            elif cell["status"] != "ok":
                line += f"{cell['status'].upper():>12}"
            else:
                ms = cell["median_s"] * 1e3
                line += f"{ms:>12.3f}" if ms < 1 else f"{ms:>12.2f}"      # (GPU times are fractions of a ms)
        bound = report["bounds_s"].get(f"{workload}@{size}")
        fused, unfused = cells.get("fused"), cells.get("unfused")
        line += f"{bound * 1e3:>10.2f}" if bound else f"{'-':>10}"
        line += f"{fused['median_s'] / bound:>12.2f}" if bound and fused and fused["median_s"] else f"{'-':>12}"
        ratio = (unfused["median_s"] / fused["median_s"]) if fused and unfused and fused["median_s"] and \
            unfused["median_s"] else None
        line += f"{ratio:>14.2f}" if ratio else f"{'-':>14}"
        lines.append(line)
    lines.append("")
    lines.append("ratios of flowjit fused to each peer (< 1: flowjit is faster)")
    for workload, size in keys:
        cells = {r["mode"]: r for r in rows if r["workload"] == workload and r["size"] == size}
        fused = cells.get("fused")
        if not fused or not fused["median_s"]:
            continue
        ratios = [f"{mode} {fused['median_s'] / cells[mode]['median_s']:.2f}x" for mode in modes
                  if mode not in ("fused",) and mode in cells and cells[mode]["median_s"]]
        lines.append(f"  {workload:<14}{size:>6}  " + ", ".join(ratios))
    lines.extend(gpu_ratios(report, keys, modes))
    lines.append("")
    lines.append("dispatch, chain on 16 elements (us per call): " + ", ".join(
        f"{r['mode']} {r['median_s'] * 1e6:.2f}" if r["median_s"] else f"{r['mode']} {r['status']}"
        for r in report["dispatch"]))
    for row in report["compile"]:
        runs = len(row.get("warm_cache_times_s", [])) or 1
        calls = (f" (the call itself: {row['empty_cache_call_s']:.2f} s and {row['warm_cache_call_s']:.2f} s)"
                 if "empty_cache_call_s" in row else "")
        lines.append(f"first call, fresh process ({row['workload']}): empty cache {row['empty_cache_s']:.2f} s, "
                     f"warm cache {row['warm_cache_s']:.2f} s (interpreter start and import included, to the "
                     f"first result; medians of {runs}){calls}")
    lines.extend(skip_summary(report["rows"] + report["dispatch"]))
    wrong = [r for r in report["rows"] if r["status"] in ("wrong", "error")]
    for r in wrong:
        lines.append(f"{r['status'].upper()}: {r['workload']}@{r['size']} {r['mode']}: {r['detail']}")
    if report["bandwidth_bytes_per_s"]:
        lines.append(f"memory bandwidth (STREAM triad): {report['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s")
    if report.get("gpu_bandwidth_bytes_per_s"):
        lines.append(f"GPU: {report['machine'].get('gpu', '?')}, device-to-device copy "
                     f"{report['gpu_bandwidth_bytes_per_s'] / 1e9:.0f} GB/s (bytes read and written)")
    if report.get("interrupted"):
        lines.append("interrupted: the figures above are those measured before the interrupt")
    return "\n".join(lines)


def skip_summary(rows: list[dict]) -> list[str]:
    """What was skipped and why, once: peers not installed (with how to get them), workloads
    whose dependency is missing, then each other reason with the workloads it applies to."""
    skipped = [r for r in rows if r["status"] == "skipped"]
    missing_peers = sorted({r["mode"] for r in skipped if r["detail"] == f"{r['mode']} is not installed"})
    workloads_missing = {}
    reasons = {}
    for r in skipped:
        if r["mode"] in missing_peers:
            continue
        if r["detail"].startswith("needs "):
            workloads_missing.setdefault(r["detail"], set()).add(r["workload"])
        else:
            reasons.setdefault((r["mode"], r["detail"]), []).append(r["workload"])
    lines = []
    if missing_peers:
        lines.append(f"skipped {', '.join(missing_peers)}: not installed ({install_hint()})")
    for detail, workloads in sorted(workloads_missing.items()):
        lines.append(f"skipped {', '.join(sorted(workloads))}: {detail}")
    for (mode, detail), workloads in sorted(reasons.items()):
        lines.append(f"skipped {mode} on {', '.join(dict.fromkeys(workloads))}: {detail}")
    return lines


def plot(report: dict, modes, path: str) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return f"plot skipped: matplotlib is not installed ({install_hint()})"
    keys = []
    for r in report["rows"]:
        if (r["workload"], r["size"]) not in keys:
            keys.append((r["workload"], r["size"]))
    shown = [m for m in modes if m != "numpy"]
    figure, axis = plt.subplots(figsize=(max(8, len(keys) * 1.2), 4.5))
    width = 0.8 / max(1, len(shown))
    for index, mode in enumerate(shown):
        speedups = []
        for workload, size in keys:
            cells = {r["mode"]: r for r in report["rows"] if r["workload"] == workload and r["size"] == size}
            base, cell = cells.get("numpy"), cells.get(mode)
            speedups.append(base["median_s"] / cell["median_s"] if base and cell and cell["median_s"]
                            and base["median_s"] else 0)
        axis.bar([k + index * width for k in range(len(keys))], speedups, width, label=mode)
    axis.set_xticks([k + width * (len(shown) - 1) / 2 for k in range(len(keys))])
    axis.set_xticklabels([f"{w}\n{s}" for w, s in keys], fontsize=8)
    axis.set_ylabel("speedup over numpy")
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.legend()
    axis.set_title("flowjit bench")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return f"wrote {path}"
