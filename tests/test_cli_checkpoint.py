"""``flowjit checkpoint ls`` and ``flowjit checkpoint show``, output checked line by line."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from flowjit.cli import main
from flowjit.cli_checkpoint import size_text
from flowjit.runtime.checkpoint import Checkpoint
from flowjit.runtime.checkpoint_format import checksum

ROOT = pathlib.Path(__file__).parent.parent


def flowjit(capsys, *args) -> tuple[int, str, str]:
    status = main(["checkpoint", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def directory(tmp_path):
    arrays = {"dense/w": np.zeros((784, 10), np.float32), "b": np.zeros(10, np.float64),
              "step": np.array(0, np.int64), "mask": np.zeros((2, 3), np.bool_)}
    checkpoint = Checkpoint(arrays, keep=3)
    for step in (100, 200, 300, 400):
        arrays["b"] = arrays["b"] + step
        checkpoint.save(tmp_path / "ckpts", step)
    return tmp_path / "ckpts"


def test_size_text():
    assert [size_text(size) for size in (0, 986, 1024, 31_948, 5 * 2**20, 3 * 2**40 + 1)] == \
        ["0 B", "986 B", "1.0 KiB", "31.2 KiB", "5.0 MiB", "3.0 TiB"]


def test_ls_lists_steps_sizes_and_the_latest(capsys, directory):
    status, out, err = flowjit(capsys, "ls", str(directory))
    assert status == 0 and err == ""
    files = [directory / f"ckpt-00000{step}.safetensors" for step in (200, 300, 400)]
    sizes = [size_text(os.path.getsize(path)) for path in files]
    assert sizes[0] == "31.6 KiB"
    assert out.splitlines() == [
        f"{directory}: 3 checkpoints, latest step 400",
        "  step      size  file",
        f"   200  {sizes[0]}  {files[0]}",
        f"   300  {sizes[1]}  {files[1]}",
        f"   400  {sizes[2]}  {files[2]}  latest"]


def test_ls_reports_stray_temporaries_a_missing_pointer_and_an_empty_directory(capsys, directory, tmp_path):
    (directory / ".tmp-ckpt-00000500.safetensors.77.0a1b").write_bytes(b"partial")
    os.unlink(directory / "latest")
    status, out, _ = flowjit(capsys, "ls", str(directory))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"{directory}: 3 checkpoints, no 'latest' pointer: a restore of the directory finds nothing"
    assert not any(line.endswith("latest") for line in lines[1:])
    assert lines[-1] == ("1 unfinished temporary file (a save was interrupted; the next save removes it): "
                         ".tmp-ckpt-00000500.safetensors.77.0a1b")
    (tmp_path / "empty").mkdir()
    assert flowjit(capsys, "ls", str(tmp_path / "empty")) == (0, f"{tmp_path / 'empty'}: no checkpoints\n", "")
    assert flowjit(capsys, "ls", str(tmp_path / "nowhere")) == \
        (1, "", f"flowjit checkpoint: error: {tmp_path / 'nowhere'}: no such directory\n")


def test_show_prints_step_variables_and_verifies_them(capsys, directory):
    path = directory / "ckpt-00000400.safetensors"
    b = np.zeros(10) + 100 + 200 + 300 + 400
    for target in (path, directory):                        # a directory shows its latest
        status, out, err = flowjit(capsys, "show", str(target))
        assert status == 0 and err == ""
        assert out.splitlines() == [
            str(path),
            "  step:       400",
            "  format:     flowjit checkpoint v1 (safetensors)",
            f"  size:       {size_text(os.path.getsize(path))} (4 variables, 30.7 KiB of data)",
            "  variable  dtype    shape          size  sha256",
            f"  b         float64  [10]           80 B  {checksum(b)[:16]}",
            f"  dense/w   float32  [784, 10]  30.6 KiB  {checksum(np.zeros((784, 10), np.float32))[:16]}",
            f"  mask      bool     [2, 3]          6 B  {checksum(np.zeros((2, 3), np.bool_))[:16]}",
            f"  step      int64    []              8 B  {checksum(np.array(0, np.int64))[:16]}",
            "  checksums:  verified (sha256 of every variable's data)"]


def test_show_fails_naming_the_corrupt_variable_or_the_empty_directory(capsys, directory, tmp_path):
    path = directory / "ckpt-00000400.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1                                           # the last tensor in the file
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(data)
    status, out, err = flowjit(capsys, "show", str(bad))
    assert status == 1 and "checksums" not in out and out.startswith(f"{bad}\n  step:       400\n")
    assert err.startswith(f"flowjit checkpoint: error: {bad}: variable '") and "is corrupt" in err
    bad.write_bytes(data[:100])
    status, out, err = flowjit(capsys, "show", str(bad))
    assert (status, out) == (1, "") and err.startswith(f"flowjit checkpoint: error: {bad}: not a readable checkpoint")
    (tmp_path / "empty").mkdir()
    assert flowjit(capsys, "show", str(tmp_path / "empty")) == \
        (1, "", f"flowjit checkpoint: error: {tmp_path / 'empty'}: no checkpoint there\n")


def test_the_installed_command_runs(directory):
    result = subprocess.run([sys.executable, "-m", "flowjit.cli", "checkpoint", "ls", str(directory)],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{directory}: 3 checkpoints, latest step 400"
    help_text = subprocess.run([sys.executable, "-m", "flowjit.cli", "checkpoint", "--help"], capture_output=True,
                               text=True, cwd=ROOT, timeout=120).stdout
    assert "ls" in help_text and "show" in help_text
