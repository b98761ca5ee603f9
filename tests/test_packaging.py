"""The package as a user installs it: a non-editable ``pip install .`` into a fresh
environment, used from outside the repository.

The fresh environment borrows this one's installed dependencies (a ``.pth`` file naming
its site-packages) and builds with its setuptools (``--no-build-isolation``), so the test
needs no network; flowjit itself comes only from the wheel pip builds from a copy of the
source tree."""

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).parent.parent
SOURCE_IGNORE = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".hypothesis",
                                       ".pytest_cache", "out", "bench-results.*")


def borrowed_paths() -> list[str]:
    """This interpreter's import path minus the repository (PYTHONPATH points there in
    development) and minus anything that is the repository's flowjit."""
    root = str(ROOT.resolve())
    return [path for path in sys.path if path and os.path.isdir(path) and str(pathlib.Path(path).resolve()) != root
            and not os.path.isdir(os.path.join(path, "flowjit", "compiler"))]


def setuptools_version() -> tuple:
    import setuptools
    return tuple(int(part) for part in setuptools.__version__.split(".")[:2])


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if setuptools_version() < (77,):
        pytest.skip("building offline needs setuptools>=77 (the test extra) in this environment")
    base = tmp_path_factory.mktemp("installed")
    source, venv = base / "source", base / "venv"
    shutil.copytree(ROOT, source, ignore=SOURCE_IGNORE)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()
    pathlib.Path(site, "borrowed.pth").write_text("\n".join(borrowed_paths()) + "\n")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    env["FLOWJIT_CACHE_DIR"] = str(base / "cache")
    install = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                              "--no-build-isolation", str(source)], cwd=base, env=env, capture_output=True,
                             text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    return venv, site, env, base


@pytest.mark.slow
def test_installed_package_holds_only_flowjit_and_its_license(installed):
    venv, site, env, base = installed
    probe = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import flowjit, flowjit.bench.harness, importlib.util, importlib.metadata as m\n"
                            "print(flowjit.__file__)\n"
                            "print(importlib.util.find_spec('bench'))\n"
                            "print(sorted(str(f) for f in m.files('flowjit') if 'LICENSE' in str(f)))"],
                           cwd=base, env=env, capture_output=True, text=True, timeout=120)
    assert probe.returncode == 0, probe.stderr
    location, bench_spec, licenses = probe.stdout.splitlines()
    assert location == os.path.join(site, "flowjit", "__init__.py")
    assert bench_spec == "None"                      # no top-level `bench` package
    assert "LICENSE" in licenses
    assert not list(pathlib.Path(site).glob("bench"))


@pytest.mark.sweep
def test_installed_bench_runs_from_outside_the_repository(installed):
    """``flowjit bench --quick`` as a user runs it after ``pip install .``: every workload, a
    table, no traceback, no ``-e`` hint.  Only the counts are cut (one timed call, one process
    per compile row, the smaller of --quick's two sizes: the 1M row adds numpy's slowest calls
    and a parallel compile per kernel, and nothing the installed package does differently) and
    torch, whose compile dominates, is left out, as is the unfused mode: the same harness code
    as the fused one, a compile of every workload op by op (20 s of the bench's 55 s with an
    empty cache); test_bench.py runs every mode from the checkout.  (34 s of make test's budget on
    two cores: ``make test-slow`` runs it, beside the installed package's other checks here.)"""
    venv, site, env, base = installed
    result = subprocess.run([str(venv / "bin" / "flowjit"), "bench", "--quick", "--sizes", "64K",
                             "--modes", "numpy,fused,jax", "--repeat", "1", "--compile-repeat", "1"],
                            cwd=base, env=env, capture_output=True, text=True, timeout=900)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output
    assert "median ms per call" in output
    from flowjit.bench.workloads import WORKLOADS
    table = output[output.index("median ms per call"):]
    for name in WORKLOADS:
        assert f"\n{name} " in table, f"{name} is missing from the table:\n{output}"
    assert "first call, fresh process (chain)" in output
    assert "pip install -e" not in output
