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
