"""Without Ray everything that needs no second process works, and a cluster's error names
the extra to install."""

import sys

import numpy as np
import pytest

import flowjit


def test_a_cluster_without_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)                  # import ray fails, as when it is absent
    with pytest.raises(flowjit.ClusterError, match=r"Ray, which is not installed: pip install "
                                                   r"'flowjit\[distributed\]' \(it brings ray>=2.9\)"):
        flowjit.Cluster({"worker": 2})
    x = np.arange(4, dtype=np.float32)                              # devices of one process still work
    np.testing.assert_allclose(flowjit.jit(lambda x: np.exp(x) + 1, devices=["cpu:0", "cpu:1"])(x), np.exp(x) + 1,
                               rtol=1e-6)


def test_a_ray_that_fails_to_import_is_not_called_missing(monkeypatch, tmp_path):
    """A dependency of Ray's missing or shadowed (a script named copy.py beside the user's): the
    error says what failed, not that Ray is not installed."""
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "__init__.py").write_text("from copy import no_such_name\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    with pytest.raises(flowjit.ClusterError, match=r"Ray, which failed to import: ImportError: cannot import name "
                                                   r"'no_such_name' from 'copy'"):
        flowjit.Cluster({"worker": 2})


@pytest.mark.parametrize("spec, message", [
    ({}, r"a cluster spec names jobs and task counts"),
    ({"worker": 0}, r"job 'worker' needs a name and at least one task"),
    ("ps=1,worker", r"'worker' is not job=count"),
])
def test_malformed_cluster_specs_are_refused_before_anything_starts(spec, message, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(flowjit.ClusterError, match=message):
        flowjit.Cluster(spec)


def test_resources_for_a_job_or_task_the_cluster_lacks_are_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(flowjit.ClusterError, match=r"resources name /job:worker/task:2, ps, which is no job or task "
                                                   r"of the cluster \(/job:worker/task:0, /job:worker/task:1\)"):
        flowjit.Cluster({"worker": 2}, resources={"ps": {"a": 1}, "/job:worker/task:2": {"b": 1}})


DUMPED = '''
import numpy as np
import flowjit

def step(x, y):
    with flowjit.device("/job:worker/task:1"):
        a = np.tanh(x) * 2
    with flowjit.device("/job:worker/task:0"):
        b = a.sum(axis=1) + y
    return b, a.max()
'''


def test_dump_of_a_cluster_placement_shows_a_graph_per_task_and_device_without_ray(tmp_path, monkeypatch, capsys):
    from flowjit.cli import main
    monkeypatch.setitem(sys.modules, "ray", None)                  # planning a cluster starts nothing
    (tmp_path / "model.py").write_text(DUMPED)
    assert main(["dump", f"{tmp_path / 'model.py'}:step", "--arg", "x=f32[3,4]", "--arg", "y=f32[3]",
                 "--stage", "partitioned", "--cluster", "ps=1,worker=2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# task /job:worker/task:0: cpu:0 (") and "# task /job:worker/task:1: cpu:0 (" in out
    devices = [line.split('device="')[1].split('"')[0] for line in out.splitlines() if line.startswith("graph @step")]
    assert devices == ["/job:worker/task:0/device:cpu:0", "/job:worker/task:1/device:cpu:0"]
    assert out.count(" = send ") == out.count(" = recv ") >= 1
    from flowjit.compiler.ir.parser import parse_all
    assert len(parse_all(out)) == 2                             # the text parses back (comments included)
    assert main(["dump", f"{tmp_path / 'model.py'}:step", "--arg", "x=f32[3,4]", "--arg", "y=f32[3]",
                 "--cluster", "ps=1,worker", "--stage", "partitioned"]) != 0
    assert "--cluster ps=1,worker: cluster spec" in capsys.readouterr().err


def test_gpus_are_given_by_job_or_task_and_malformed_counts_are_refused(monkeypatch):
    from flowjit.runtime.cluster_spec import gpu_counts
    tasks = ["/job:ps/task:0", "/job:worker/task:0", "/job:worker/task:1"]
    assert gpu_counts(tasks, None) == gpu_counts(tasks, 0) == dict.fromkeys(tasks, 0)
    assert gpu_counts(tasks, 1) == gpu_counts(tasks, "1") == dict.fromkeys(tasks, 1)
    assert gpu_counts(tasks, {"worker": 0, "/job:worker/task:1": 1}) == {tasks[0]: 0, tasks[1]: 0, tasks[2]: 1}
    assert gpu_counts(tasks, "worker=1,/job:worker/task:0=0") == {tasks[0]: 0, tasks[1]: 0, tasks[2]: 1}
    assert gpu_counts(tasks, {"worker": 2}) == {tasks[0]: 0, tasks[1]: 2, tasks[2]: 2}
    monkeypatch.setitem(sys.modules, "ray", None)
    for gpus, message in [({"chief": 1}, r"gpus name chief, which is no job or task of the cluster"),
                          ("worker=one", r"gpus 'worker=one': 'worker=one' is not job=count \(e.g. worker=1\)"),
                          ({"worker": -1}, r"gpus: /job:worker/task:0 is given -1 GPUs; give a count"),
                          ({"worker": 1.5}, r"gpus: /job:worker/task:0 is given 1.5 GPUs; give a count"),
                          ([1], r"gpus: give a count for every task or counts by job or task")]:
        with pytest.raises(flowjit.ClusterError, match=message):
            flowjit.Cluster({"ps": 1, "worker": 2}, gpus=gpus)


def test_dump_of_a_cluster_with_gpus_places_on_a_tasks_gpu_without_ray(tmp_path, monkeypatch, capsys):
    from flowjit.cli import main
    monkeypatch.setitem(sys.modules, "ray", None)
    (tmp_path / "model.py").write_text(DUMPED.replace('"/job:worker/task:1"', '"/job:worker/task:1/device:gpu:0"'))
    assert main(["dump", f"{tmp_path / 'model.py'}:step", "--arg", "x=f32[3,4]", "--arg", "y=f32[3]",
                 "--stage", "partitioned", "--cluster", "worker=2", "--gpus", "/job:worker/task:1=1"]) == 0
    out = capsys.readouterr().out
    devices = [line.split('device="')[1].split('"')[0] for line in out.splitlines() if line.startswith("graph @step")]
    assert "/job:worker/task:1/device:gpu:0" in devices and "/job:worker/task:0/device:cpu:0" in devices
    assert main(["dump", f"{tmp_path / 'model.py'}:step", "--arg", "x=f32[3,4]", "--arg", "y=f32[3]",
                 "--stage", "partitioned", "--cluster", "worker=2"]) != 0
    assert "gpu:0" in capsys.readouterr().err
    assert main(["dump", f"{tmp_path / 'model.py'}:step", "--arg", "x=f32[3,4]", "--arg", "y=f32[3]",
                 "--gpus", "worker=1"]) != 0
    assert "--gpus gives the tasks of --cluster their GPUs: give --cluster too" in capsys.readouterr().err


def test_what_leaves_a_task_is_on_the_host(monkeypatch):
    """A GPU's array (anything with ``__cuda_array_interface__``) is copied back before it is
    sent or returned; host arrays and None pass as they are."""
    from flowjit.runtime import cluster_task
    from helpers import ForeignGpuArray

    copied = np.arange(2, dtype=np.float32)
    monkeypatch.setattr(cluster_task, "to_host", lambda value: copied if isinstance(value, ForeignGpuArray) else None)
    host = np.ones(3)
    assert cluster_task.on_host(ForeignGpuArray((2,), "<f4")) is copied
    assert cluster_task.on_host(host) is host and cluster_task.on_host(None) is None
