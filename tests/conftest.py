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


@pytest.fixture
def rng():
    return np.random.default_rng(0)
