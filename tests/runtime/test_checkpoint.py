"""Checkpoint: what is saved comes back exactly, the directory keeps its last K, and every bad
checkpoint is a clear error that names the file and the variable and assigns nothing."""

from __future__ import annotations

import fcntl
import json
import os
import struct

import numpy as np
import pytest

import flowjit
from checkpoint_helpers import FakeVariable, values
from flowjit.errors import CheckpointError, FlowjitError
from flowjit.runtime import checkpoint_files
from flowjit.runtime.checkpoint import Checkpoint, CheckpointPolicy, read_checkpoint, read_header

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


def every_dtype(rng) -> dict[str, np.ndarray]:
    arrays = {f"x_{name}": (rng.standard_normal((2, 3)) * 50).astype(name) for name in DTYPES}
    arrays["scalar"] = np.array(2.5, dtype=np.float32)
    arrays["empty"] = np.zeros((0, 4), dtype=np.int32)
    arrays["big_endian"] = np.arange(6, dtype=">f8").reshape(3, 2)
    arrays["strided"] = np.arange(24, dtype=np.int16).reshape(4, 6).T[::2]
    arrays["special"] = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32)
    return arrays


def assert_same(got, want):
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].dtype == np.asarray(want[name]).dtype.newbyteorder("="), name
        assert got[name].shape == np.asarray(want[name]).shape, name
        assert got[name].tobytes() == np.asarray(want[name], dtype=got[name].dtype).tobytes(), name


def test_arrays_of_every_dtype_come_back_bit_for_bit(tmp_path, rng):
    arrays = every_dtype(rng)
    path = Checkpoint(arrays).save(tmp_path, 7)
    assert path == str(tmp_path / "ckpt-00000007.safetensors")
    restored = flowjit.Checkpoint(arrays).restore(tmp_path)
    assert_same(restored, arrays)
    assert (restored.step, restored.path) == (7, path)
    assert all(array.flags.writeable for array in restored.values())


def test_the_file_is_plain_safetensors_that_other_readers_open(tmp_path, rng):
    from safetensors.numpy import load_file
    arrays = every_dtype(rng)
    path = Checkpoint(arrays).save(tmp_path, 3)
    assert_same(load_file(path), arrays)
    header = read_header(path)
    assert header.step == 3 and header.file_size == os.path.getsize(path)
    assert [tensor.name for tensor in header.tensors] == sorted(arrays)


def test_variables_are_assigned_from_a_list_or_a_mapping(tmp_path):
    w, b = FakeVariable("w", np.ones((2, 3), np.float32)), FakeVariable("b", np.zeros(3, np.float64))
    checkpoint = Checkpoint([w, b])
    checkpoint.save(tmp_path, 1)
    w.assign(np.full((2, 3), 9, np.float32))
    b.assign(np.full(3, 9.0))
    restored = checkpoint.restore(tmp_path)
    assert np.array_equal(w.numpy(), np.ones((2, 3))) and np.array_equal(b.numpy(), np.zeros(3))
    assert sorted(restored) == ["b", "w"] and restored.step == 1
    restored["w"][0, 0] = 42                         # the returned arrays are not the variables' buffers
    assert w.numpy()[0, 0] == 1
    # A mapping names the variables by its keys, whatever their own names.
    other = FakeVariable("unrelated", np.zeros((2, 3), np.float32))
    Checkpoint({"w": other, "b": FakeVariable("b", np.ones(3))}).restore(tmp_path)
    assert np.array_equal(other.numpy(), np.ones((2, 3)))


def test_a_mapping_of_arrays_is_read_at_each_save(tmp_path):
    params = {"w": np.zeros(3, np.float32)}
    checkpoint = Checkpoint(params)
    checkpoint.save(tmp_path, 0)
    params["w"] = params["w"] + 1                    # rebinding the entry, as a numpy training loop does
    checkpoint.save(tmp_path, 1)
    params.update(checkpoint.restore(tmp_path / "ckpt-00000000.safetensors"))
    assert np.array_equal(params["w"], np.zeros(3)) and params["w"].dtype == np.float32
    assert np.array_equal(checkpoint.restore(tmp_path)["w"], np.ones(3))


def test_the_directory_keeps_the_last_k_and_points_at_the_latest(tmp_path):
    checkpoint = Checkpoint({"x": np.zeros(2)}, keep=2)
    assert Checkpoint.latest(tmp_path) is None and Checkpoint.checkpoints(tmp_path / "nothing") == []
    for step in (10, 20, 30, 40, 50):
        checkpoint.save(tmp_path, step)
    listed = checkpoint.checkpoints(tmp_path)
    assert [(entry.step, entry.latest) for entry in listed] == [(40, False), (50, True)]
    assert listed[1].path == str(tmp_path / "ckpt-00000050.safetensors") == checkpoint.latest(tmp_path)
    assert listed[1].size == os.path.getsize(listed[1].path)
    assert (tmp_path / "latest").read_text() == "ckpt-00000050.safetensors\n"
    # Saving an older step (training restarted from an older checkpoint) never deletes the new one.
    checkpoint.save(tmp_path, 45)
    assert [(entry.step, entry.latest) for entry in checkpoint.checkpoints(tmp_path)] == [(45, True), (50, False)]
    assert checkpoint.restore(tmp_path).step == 45
    everything = Checkpoint({"x": np.zeros(2)}, keep=None)
    for step in range(8):
        everything.save(tmp_path / "all", step)
    assert len(everything.checkpoints(tmp_path / "all")) == 8


def test_a_save_removes_what_a_dead_writer_left_and_nothing_reads_it(tmp_path):
    checkpoint = Checkpoint({"x": np.arange(3)})
    checkpoint.save(tmp_path, 1)
    stray = [tmp_path / ".tmp-ckpt-00000002.safetensors.123.abcd", tmp_path / ".tmp-latest.123.ef01"]
    stray[0].write_bytes(open(checkpoint.latest(tmp_path), "rb").read()[:50])
    stray[1].write_text("ckpt-00000002.safetensors\n")
    assert [entry.step for entry in checkpoint.checkpoints(tmp_path)] == [1]
    assert checkpoint.restore(tmp_path).step == 1
    checkpoint.save(tmp_path, 2)
    assert not any(path.exists() for path in stray)
    assert sorted(os.listdir(tmp_path)) == [".lock", "ckpt-00000001.safetensors", "ckpt-00000002.safetensors",
                                            "latest"]


def test_restore_latest_on_a_restart(tmp_path):
    checkpoint = Checkpoint({"x": np.arange(3)})
    assert checkpoint.restore_latest(tmp_path / "new") is None
    checkpoint.save(tmp_path / "new", 5)
    assert checkpoint.restore_latest(tmp_path / "new").step == 5


# Errors ---------------------------------------------------------------------------------------

def saved_variables(tmp_path):
    variables = [FakeVariable("w", np.arange(6, dtype=np.float32).reshape(2, 3)),
                 FakeVariable("b", np.arange(3, dtype=np.float64))]
    path = Checkpoint(variables).save(tmp_path, 4)
    return path, [FakeVariable(v.name, v.numpy() * 0 - 1) for v in variables]


def assert_nothing_assigned(variables):
    assert all(variable.assigned == [] for variable in variables)
    assert all(np.all(variable.numpy() == -1) for variable in variables)


def test_an_empty_or_missing_directory_says_there_is_no_checkpoint(tmp_path):
    checkpoint = Checkpoint({"x": np.zeros(1)})
    with pytest.raises(CheckpointError, match=f"^{tmp_path}: no checkpoint there$"):
        checkpoint.restore(tmp_path)
    with pytest.raises(CheckpointError, match="nowhere: no such checkpoint file or directory"):
        checkpoint.restore(tmp_path / "nowhere")
    checkpoint.save(tmp_path, 3)
    os.unlink(tmp_path / "latest")
    with pytest.raises(CheckpointError, match="no checkpoint there; it has ckpt-00000003.safetensors but no "
                                              "'latest' pointer .* restore one of them by its path"):
        checkpoint.restore(tmp_path)
    (tmp_path / "latest").write_text("ckpt-00000009.safetensors\n")
    with pytest.raises(CheckpointError, match="'latest' pointer names ckpt-00000009.safetensors, which does not"):
        checkpoint.restore(tmp_path)
    (tmp_path / "latest").write_text("garbage")
    with pytest.raises(CheckpointError, match="latest: the latest-checkpoint pointer is corrupt"):
        checkpoint.restore(tmp_path)


@pytest.mark.parametrize("problem, changed, message", [
    ("shape", [("w", np.zeros((3, 2), np.float32))], "variable 'w' is float32[3, 2] but the checkpoint holds "
                                                      "float32[2, 3]"),
    ("dtype", [("b", np.zeros(3, np.float32))], "variable 'b' is float32[3] but the checkpoint holds float64[3]"),
    ("missing", [("extra_in_model", np.zeros(1))], "variable 'extra_in_model' is not in the checkpoint"),
    ("extra", [("w", None)], "the checkpoint has a variable 'w' that this Checkpoint does not hold"),
])
def test_a_mismatched_checkpoint_names_file_and_variable_and_assigns_nothing(tmp_path, problem, changed, message):
    path, variables = saved_variables(tmp_path)
    by_name = {variable.name: variable for variable in variables}
    for name, value in changed:
        if value is None:
            del by_name[name]
        else:
            by_name[name] = FakeVariable(name, value - 1)
    with pytest.raises(CheckpointError) as caught:
        Checkpoint(list(by_name.values())).restore(tmp_path)
    assert str(caught.value) == f"{path}: does not match the variables, so nothing was restored:\n  {message}"
    assert caught.value.path == path and caught.value.variable == changed[0][0]
    assert_nothing_assigned([v for v in by_name.values() if v.name not in dict(changed)] + variables)


def test_every_mismatch_is_listed_at_once(tmp_path):
    path, _ = saved_variables(tmp_path)
    with pytest.raises(CheckpointError) as caught:
        Checkpoint({"w": np.zeros(2, np.float32), "c": np.zeros(1)}).restore(path)
    assert str(caught.value).splitlines()[1:] == [
        "  the checkpoint has a variable 'b' that this Checkpoint does not hold",
        "  variable 'c' is not in the checkpoint",
        "  variable 'w' is float32[2] but the checkpoint holds float32[2, 3]"]


def test_a_flipped_bit_in_any_tensor_names_that_variable(tmp_path):
    path, variables = saved_variables(tmp_path)
    data = bytearray(open(path, "rb").read())
    (header_length,) = struct.unpack("<Q", data[:8])
    layout = json.loads(data[8:8 + header_length])
    for name in ("w", "b"):
        start, end = layout[name]["data_offsets"]
        corrupt = bytearray(data)
        corrupt[8 + header_length + (start + end) // 2] ^= 0x10
        bad = tmp_path / f"bad-{name}.safetensors"
        bad.write_bytes(corrupt)
        with pytest.raises(CheckpointError) as caught:
            Checkpoint(variables).restore(bad)
        described = {"w": "float32[2, 3]", "b": "float64[3]"}[name]
        assert str(caught.value) == f"{bad}: variable '{name}' ({described}) is corrupt: its data does not match its sha256"
        assert caught.value.variable == name
    assert_nothing_assigned(variables)


def test_a_corrupt_latest_is_an_error_that_names_the_older_checkpoints(tmp_path):
    checkpoint = Checkpoint({"x": np.arange(4.0)})
    for step in (1, 2, 3):
        checkpoint.save(tmp_path, step)
    latest = tmp_path / "ckpt-00000003.safetensors"
    data = bytearray(latest.read_bytes())
    data[-1] ^= 1
    latest.write_bytes(data)
    with pytest.raises(CheckpointError) as caught:
        checkpoint.restore(tmp_path)
    assert str(caught.value) == (
        f"{latest}: variable 'x' (float64[4]) is corrupt: its data does not match its sha256\n(the latest checkpoint "
        f"of {tmp_path}; its others, which a restore by path reads: ckpt-00000001.safetensors, "
        f"ckpt-00000002.safetensors)")
    assert caught.value.variable == "x" and caught.value.path == str(latest)
    assert checkpoint.restore(tmp_path / "ckpt-00000002.safetensors").step == 2


def test_saving_a_step_again_replaces_its_checkpoint(tmp_path):
    params = {"x": np.zeros(2)}
    checkpoint = Checkpoint(params)
    checkpoint.save(tmp_path, 5)
    params["x"] = np.ones(2)
    checkpoint.save(tmp_path, 5)
    assert [entry.step for entry in checkpoint.checkpoints(tmp_path)] == [5]
    assert np.array_equal(checkpoint.restore(tmp_path)["x"], np.ones(2))


def test_a_truncated_checkpoint_never_restores(tmp_path):
    path, variables = saved_variables(tmp_path)
    data = open(path, "rb").read()
    bad = tmp_path / "truncated.safetensors"
    for length in sorted(set(range(0, len(data), 7)) | {len(data) - 1, 8, 9}):
        bad.write_bytes(data[:length])
        with pytest.raises(CheckpointError, match=f"^{bad}: not a readable checkpoint \\(truncated or corrupt\\)"):
            Checkpoint(variables).restore(bad)
        with pytest.raises(CheckpointError, match=f"^{bad}: not a readable checkpoint"):
            read_header(str(bad))
    assert_nothing_assigned(variables)


def test_a_changed_record_or_a_foreign_file_is_refused(tmp_path):
    from safetensors.numpy import save_file
    path, variables = saved_variables(tmp_path)
    data = open(path, "rb").read()
    edited = tmp_path / "edited.safetensors"
    edited.write_bytes(data.replace(b'"flowjit.step":"4"', b'"flowjit.step":"5"'))
    with pytest.raises(CheckpointError, match="edited.safetensors: the checkpoint's record .* is corrupt"):
        Checkpoint(variables).restore(edited)
    edited.write_bytes(data.replace(b'"flowjit.format":"1"', b'"flowjit.format":"9"'))
    with pytest.raises(CheckpointError, match="format version '9'; this flowjit reads version 1"):
        read_checkpoint(edited)
    foreign = tmp_path / "foreign.safetensors"
    save_file({"w": np.zeros(3, np.float32)}, str(foreign))
    with pytest.raises(CheckpointError, match="foreign.safetensors: a safetensors file but not a flowjit checkpoint"):
        read_checkpoint(foreign)
    assert_nothing_assigned(variables)


def test_what_cannot_be_saved_fails_before_the_disk_is_touched(tmp_path):
    target = tmp_path / "ckpt"
    for arrays, message in [
        ({"z": np.zeros(2, np.complex64)}, "variable 'z' has dtype complex64, which a checkpoint cannot hold"),
        ({"o": np.array([None], dtype=object)}, "variable 'o' has dtype object"),
        ({}, "nothing to save"),
    ]:
        with pytest.raises(CheckpointError, match=message):
            Checkpoint(arrays).save(target, 0)
    for step, message in [(-1, "must not be negative"), (1.5, "must be an integer")]:
        with pytest.raises(CheckpointError, match=message):
            Checkpoint({"x": np.zeros(1)}).save(target, step)
    assert not target.exists()


def test_a_file_system_error_is_a_checkpoint_error_naming_the_directory(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(CheckpointError, match=f"^{tmp_path / 'file'}: cannot save the checkpoint of step 3: "
                                              f".*Not a directory"):
        Checkpoint({"x": np.zeros(1)}).save(tmp_path / "file", 3)
    with pytest.raises(CheckpointError, match=f"^{tmp_path / 'file' / 'x'}: cannot read the checkpoint: "):
        read_checkpoint(tmp_path / "file" / "x")


@pytest.mark.parametrize("variables, keep, message", [
    ([FakeVariable("a", 1.0), FakeVariable("a", 2.0)], 5, "two variables are named 'a'"),
    ([np.zeros(2)], 5, r"item 0 \(ndarray\) is not a variable with a name"),
    ({"": np.zeros(1)}, 5, "'' cannot name a variable"),
    ({"__metadata__": np.zeros(1)}, 5, "'__metadata__' cannot name a variable"),
    ({"x": [1, 2]}, 5, "'x' is a list, neither a numpy array nor a variable"),
    (np.zeros(2), 5, "not ndarray"),
    ({"x": np.zeros(1)}, 0, "keep is the number of checkpoints to keep, at least 1"),
])
def test_bad_arguments_are_refused(variables, keep, message):
    with pytest.raises(CheckpointError, match=message):
        Checkpoint(variables, keep=keep)
    assert issubclass(CheckpointError, FlowjitError)


def test_a_save_waits_for_another_writer_but_not_forever(tmp_path):
    Checkpoint({"x": np.zeros(1)}).save(tmp_path, 0)
    with open(tmp_path / ".lock", "w") as other_writer:
        fcntl.flock(other_writer, fcntl.LOCK_EX)
        with pytest.raises(CheckpointError, match="another process has been saving a checkpoint there for over "
                                                  "0.2 s"):
            Checkpoint({"x": np.zeros(1)}, lock_timeout=0.2).save(tmp_path, 1)
    Checkpoint({"x": np.zeros(1)}, lock_timeout=0.2).save(tmp_path, 1)
    assert [entry.step for entry in checkpoint_files.entries(str(tmp_path))] == [0, 1]


def test_values_helper_gives_each_step_its_own_values():
    assert not np.array_equal(values(3)["embedding"], values(4)["embedding"])
    assert not np.array_equal(values(1)["mask"], values(2)["mask"])


# The saving policy ----------------------------------------------------------------------------

def test_policy_every_n_steps_counts_from_the_last_save():
    policy = CheckpointPolicy(every_steps=3, last_time=0.0)
    assert [step for step in range(1, 8) if policy.due(step, now=0.0)] == [3, 4, 5, 6, 7]
    policy.saved(3, now=0.0)
    assert [step for step in range(4, 10) if policy.due(step, now=0.0)] == [6, 7, 8, 9]
    resumed = CheckpointPolicy(every_steps=100, last_step=250, last_time=0.0)    # restored at step 250
    assert not resumed.due(300, now=1e9) and resumed.due(350, now=0.0)


def test_policy_every_t_seconds_and_whichever_comes_first():
    policy = CheckpointPolicy(every_seconds=60.0, last_time=1000.0)
    assert not policy.due(10**6, now=1059.9) and policy.due(1, now=1060.0)
    policy.saved(7, now=1075.0)
    assert not policy.due(8, now=1134.0) and policy.due(8, now=1135.0)
    both = CheckpointPolicy(every_steps=10, every_seconds=5.0, last_time=0.0)
    assert both.due(10, now=0.0) and both.due(1, now=5.0) and not both.due(9, now=4.9)
    clock = CheckpointPolicy(every_seconds=3600.0)                # the default clock: time.monotonic()
    assert not clock.due(1)


@pytest.mark.parametrize("arguments, message", [
    ({}, "give every_steps, every_seconds or both"),
    ({"every_steps": 0}, "every_steps=0"),
    ({"every_steps": 2.5}, "every_steps=2.5"),
    ({"every_seconds": -1.0}, "every_seconds=-1.0"),
])
def test_policy_refuses_bad_intervals(arguments, message):
    with pytest.raises(CheckpointError, match=message):
        CheckpointPolicy(**arguments)


def test_a_directory_no_save_has_made_yet_has_no_temporaries(tmp_path):
    """A writer killed before it created the directory leaves nothing to clean (the random-kill
    test met this under load: listing the missing directory raised)."""
    from flowjit.runtime import checkpoint_files
    assert checkpoint_files.temporaries(str(tmp_path / "never-made")) == []
