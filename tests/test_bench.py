"""The benchmark harness on tiny sizes: it checks before it times, and says what it skipped."""

import json
import subprocess
import sys
import pathlib

import numpy as np
import pytest

from flowjit.bench import harness
from flowjit.bench import report as report_module

ROOT = pathlib.Path(__file__).parent.parent


def tiny_run(monkeypatch=None, modes=("numpy", "unfused", "fused")):
    return harness.run(["chain", "softmax", "black_scholes"], ["4K"], list(modes), repeat=3,
                       compile_rows=False, bandwidth_elements=1 << 16)


def test_every_mode_checked_and_timed():
    report = tiny_run()
    rows = report["rows"]
    assert {(r["workload"], r["mode"]) for r in rows} == {
        (w, m) for w in ("chain", "softmax", "black_scholes") for m in ("numpy", "unfused", "fused")}
    for row in rows:
        assert row["status"] == "ok", row
        assert len(row["times_s"]) == 3 and row["median_s"] > 0 and row["first_call_s"] > 0
    assert report["bandwidth_bytes_per_s"] > 0 and report["bounds_s"]["chain@4K"] > 0
    assert [r["mode"] for r in report["dispatch"]] == ["numpy", "unfused", "fused"]
    table = report_module.format_table(report, ["numpy", "unfused", "fused"])
    assert "chain" in table and "dispatch, chain on 16 elements" in table


def test_wrong_results_are_reported_not_timed(monkeypatch):
    real = harness.make_callable

    def broken(mode, workload, args):
        call = real(mode, workload, args)
        return (lambda: np.asarray(call()) + 1.0) if mode == "fused" else call
    monkeypatch.setattr(harness, "make_callable", broken)
    report = tiny_run()
    fused = [r for r in report["rows"] if r["mode"] == "fused"]
    assert all(r["status"] == "wrong" and r["median_s"] is None and r["times_s"] == [] for r in fused)
    assert "max error" in fused[0]["detail"]
    assert "WRONG: chain@4K fused" in report_module.format_table(report, ["numpy", "unfused", "fused"])


def test_modes_take_turns_and_a_peer_failing_while_timed_is_an_error(monkeypatch):
    """After each mode's first call, check and warm-up, the timed calls go round the modes
    (one call each per round); a mode that raises on its fourth call is reported as an
    error, the others keep their medians."""
    real, order = harness.make_callable, []

    def recording(mode, workload, args):
        call, calls = real(mode, workload, args), [0]

        def wrapped():
            order.append(mode)
            calls[0] += 1
            if mode == "unfused" and calls[0] == 4:
                raise RuntimeError("lost the device")
            return call()
        return wrapped
    monkeypatch.setattr(harness, "make_callable", recording)
    report = harness.run(["chain"], ["4K"], ["numpy", "unfused", "fused"], repeat=3, 
                         compile_rows=False, bandwidth_elements=1 << 16)
    assert order[:9] == ["numpy"] * 3 + ["unfused"] * 3 + ["fused"] * 3          # first call + 2 warm-ups
    assert order[9:16] == ["numpy", "unfused", "fused", "numpy", "fused", "numpy", "fused"]
    rows = {row["mode"]: row for row in report["rows"]}
    assert rows["unfused"]["status"] == "error" and "lost the device" in rows["unfused"]["detail"]
    assert rows["unfused"]["median_s"] is None
    assert all(rows[m]["status"] == "ok" and len(rows[m]["times_s"]) == 3 for m in ("numpy", "fused"))


def test_missing_peers_are_listed_as_skipped(monkeypatch):
    monkeypatch.setattr(harness, "available", lambda mode: "jax is not installed" if mode == "jax" else None)
    report = tiny_run(modes=("numpy", "fused", "jax"))
    jax_rows = [r for r in report["rows"] if r["mode"] == "jax"]
    assert jax_rows and all(r["status"] == "skipped" and "not installed" in r["detail"] for r in jax_rows)
    table = report_module.format_table(report, ["numpy", "fused", "jax"])
    assert "skipped jax: not installed (pip install -e '.[bench]')" in table


def test_numexpr_skips_what_it_cannot_express(monkeypatch):
    monkeypatch.setattr(harness, "available", lambda mode: None)
    report = harness.run(["softmax"], ["4K"], ["numexpr"], repeat=1, 
                         compile_rows=False, bandwidth_elements=1 << 16)
    assert report["rows"][0]["status"] == "skipped"
    assert report["rows"][0]["detail"] == "not expressible as one numexpr expression"


def test_cli_writes_json(tmp_path):
    path = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "bench", "--workloads", "chain", "--sizes", "4K",
                             "--modes", "numpy,fused", "--repeat", "3", "--compile-repeat", "1", "--json",
                             str(path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "median ms per call" in result.stdout and "memory bandwidth (STREAM triad)" in result.stdout
    # Piped: no progress, every cell once (the table's row and its ratios line), no promise of brackets.
    assert result.stderr == "" and "brackets" not in result.stdout
    assert [line.split()[:2] for line in result.stdout.splitlines() if "chain" in line and "4K" in line] == [
        ["chain", "4K"], ["chain", "4K"]]
    report = json.loads(path.read_text())
    assert report["machine"]["numpy"] and report["rows"][0]["workload"] == "chain"
    compile_row = report["compile"][0]
    assert 0 < compile_row["empty_cache_s"] < compile_row["empty_cache_exit_s"]
    assert len(compile_row["warm_cache_times_s"]) == 1
    assert 0 < compile_row["warm_cache_s"] < compile_row["warm_cache_exit_s"]
    assert 0 < compile_row["empty_cache_call_s"] < compile_row["empty_cache_s"]
    assert "(the call itself: " in result.stdout


def test_cli_rejects_unknown_names():
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "bench", "--workloads", "nope"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 2 and "unknown workload 'nope'" in result.stderr


def test_reductions_benchmark_checks_every_case(capsys):
    """flowjit.bench.reductions on a tiny matrix: every case runs, matches numpy, and is timed."""
    from flowjit.bench import reductions
    assert reductions.main(["--rows", "64", "--columns", "192"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines[2:] if line.strip()]
    assert len(rows) == len(reductions.CASES) and not any("WRONG" in line for line in rows), lines


def test_a_workload_whose_dependency_is_missing_is_skipped(monkeypatch):
    """black_scholes's numpy version needs scipy (erf): without it the workload is skipped
    with the reason, and the other workloads still run and are tabled."""
    real = harness.missing_module
    monkeypatch.setattr(harness, "missing_module",
                        lambda module: "scipy is not installed" if module == "scipy" else real(module))
    report = tiny_run()
    rows = {(r["workload"], r["mode"]): r for r in report["rows"]}
    assert all(rows[("black_scholes", m)]["status"] == "skipped" for m in ("numpy", "unfused", "fused"))
    assert rows[("black_scholes", "fused")]["detail"] == "needs scipy is not installed"
    assert all(rows[(w, m)]["status"] == "ok" for w in ("chain", "softmax") for m in ("numpy", "unfused", "fused"))
    assert "chain" in report_module.format_table(report, ["numpy", "unfused", "fused"])


def test_an_interrupt_keeps_what_was_measured(monkeypatch):
    """Ctrl-C during the second workload ends the run with the first one's figures."""
    real = harness.make_callable

    def interrupting(mode, workload, args):
        if workload.name == "softmax":
            raise KeyboardInterrupt
        return real(mode, workload, args)
    monkeypatch.setattr(harness, "make_callable", interrupting)
    report = tiny_run()
    assert report["interrupted"]
    assert {r["workload"] for r in report["rows"]} == {"chain"}
    assert all(r["status"] == "ok" for r in report["rows"])
    table = report_module.format_table(report, ["numpy", "unfused", "fused"])
    assert "chain" in table and "interrupted" in table


def test_install_hint_fits_the_installation():
    """A checkout gets ``pip install -e``; an installed package the index's name."""
    assert report_module.install_hint() == "pip install -e '.[bench]'"        # this test runs from the checkout


def test_one_skip_summary_for_missing_peers_and_reasons(monkeypatch):
    """Two missing peers over three workloads are one line with how to install them; numexpr's
    reason is one line naming the workloads it applies to (it was a line per cell)."""
    monkeypatch.setattr(harness, "available",
                        lambda mode: f"{mode} is not installed" if mode in ("jax", "torch") else None)
    modes = ["numpy", "fused", "numexpr", "jax", "torch"]
    report = tiny_run(modes=modes)
    summary = [line for line in report_module.format_table(report, modes).splitlines() if line.startswith("skipped")]
    assert summary == ["skipped jax, torch: not installed (pip install -e '.[bench]')",
                       "skipped numexpr on softmax, black_scholes: not expressible as one numexpr expression"]


def test_progress_is_one_live_line_on_a_terminal_and_nothing_elsewhere():
    import io
    stream = io.StringIO()
    progress = harness.Progress(stream, live=True)
    harness.run(["chain"], ["4K"], ["numpy", "fused"], repeat=1, progress=progress, compile_rows=False,
                bandwidth_elements=1 << 16)
    assert progress.done == progress.total == harness.cell_count(["chain"], ["4K"], ["numpy", "fused"], False)
    written = stream.getvalue()
    assert "\n" not in written and written.count("\r\033[K[") >= progress.total and written.endswith("\r\033[K")
    quiet = io.StringIO()
    harness.run(["chain"], ["4K"], ["numpy"], repeat=1, progress=harness.Progress(quiet), compile_rows=False,
                bandwidth_elements=1 << 16)
    assert quiet.getvalue() == ""                                  # a StringIO is not a terminal


def test_help_is_plain_text_and_names_the_workloads(capsys):
    import pytest
    with pytest.raises(SystemExit):
        harness.main(["--help"])
    text = capsys.readouterr().out
    assert "``" not in text and "--compile-repeat" in text
    for name, workload in harness.WORKLOADS.items():
        assert f"  {name:<14}{workload.about}" in text


def test_small_mlp_is_benchmarked_and_checked():
    """The 64x784 -> 128 -> 10 MLP (small matmuls with epilogues) is a workload of its own."""
    report = harness.run(["mlp_small"], ["4K"], ["numpy", "unfused", "fused"], repeat=3, compile_rows=False,
                         bandwidth_elements=1 << 16)
    rows = {r["mode"]: r for r in report["rows"]}
    assert {r["size"] for r in report["rows"]} == {"fixed"}
    assert all(rows[m]["status"] == "ok" and rows[m]["median_s"] > 0 for m in ("numpy", "unfused", "fused")), rows


def test_compile_scaling_compiles_each_size_in_a_fresh_process(tmp_path):
    from flowjit.bench.harness import main
    path = tmp_path / "scaling.json"
    assert main(["--compile-scaling", "--sizes", "30", "--program", "chain", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())
    assert [row["ops"] for row in rows] == [1, 30]
    assert rows[1]["kernels"] == 1 and rows[1]["seconds"] > rows[1]["passes_seconds"] > 0
    assert rows[1]["peak_rss_mb"] > 0 and "marginal_ms_per_op" in rows[1]     # noise can make it < 0


@pytest.mark.sweep
def test_every_workload_checked_in_every_flowjit_mode():
    """Every workload unfused and fused, checked against numpy before it is timed (a sweep:
    ``make test-slow`` runs it).  ``make test`` checks chain, softmax and black_scholes here,
    mlp_small below, and every workload fused through the installed package
    (test_packaging.py)."""
    report = harness.run(list(harness.WORKLOADS), ["4K"], ["numpy", "unfused", "fused"], repeat=1,
                         compile_rows=False, bandwidth_elements=1 << 16)
    rows = report["rows"]
    assert {(r["workload"], r["mode"]) for r in rows} == {
        (w, m) for w in harness.WORKLOADS for m in ("numpy", "unfused", "fused")}
    for row in rows:
        assert row["status"] == "ok", row
