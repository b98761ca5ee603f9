import os
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

sys.path.insert(0, os.path.dirname(__file__))

# One kernel cache for the whole run, shared by the xdist workers (which exercises
# concurrent compiles of one kernel); tests that need an empty cache make their own.
os.environ.setdefault("FLOWJIT_CACHE_DIR", os.path.join(tempfile.gettempdir(), "flowjit-test-cache"))
# CUDA tests (tests/cuda) run on numba's CUDA simulator, unless NUMBA_ENABLE_CUDASIM=0 asks for a
# real GPU; numba-cuda reads this once, when it loads, so it is set before anything imports it.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# Verify the graph after every pass in every test (CompileOptions.verify_each).
os.environ["FLOWJIT_VERIFY"] = "1"

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup`` (pyproject's addopts) sends the tests of one ``xdist_group`` to one
    worker: pytest-xdist's worker appends ``@<group>`` to each such test's nodeid, and its
    scheduler groups by that suffix.  It does so by assigning ``item._nodeid``, which pytest 9
    no longer reads (the nodeid lives in ``item._id``), so every group was scattered over both
    workers: a Ray cluster started in each, and each module fixture of a group computed twice.
    Here, after xdist's hook, the suffix goes where this pytest keeps the nodeid (a no-op
    wherever xdist's assignment took)."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = {str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                  for mark in item.iter_markers("xdist_group")}
        nodeid = item.nodeid
        if not groups or nodeid.rfind("@") > nodeid.rfind("]"):
            continue
        grouped = f"{nodeid}@{'_'.join(sorted(groups))}"
        if hasattr(item, "_id"):
            from _pytest.nodeid import NodeId
            item._id = NodeId.parse(grouped)
        else:
            item._nodeid = grouped
    # A group runs on one worker from start to end (the Ray cluster's tests: a minute and more):
    # scheduled first, while the other worker takes the single tests, not last, with the other
    # worker idle for all of it.
    items[:] = sorted(items, key=lambda item: "@" not in item.nodeid)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
