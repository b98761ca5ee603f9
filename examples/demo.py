"""`make demo`: trace a numpy function, show its IR at every stage, run it, check it against numpy."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

import flowjit  # noqa: E402
from models import black_scholes, repeated  # noqa: E402


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(8).astype(np.float32)
    jitted = flowjit.jit(repeated)
    lowered = jitted.lower(x)
    for stage in lowered.stages:
        nodes = sum(len(graph.nodes) for graph in lowered.stage_graphs(stage))
        print(f"== stage '{stage}' ({nodes} nodes) ==")
        print(lowered.as_text(stage=stage))
    result = jitted(x)
    print("result:", np.array2string(result, precision=4))
    expected = repeated(x)
    ulps = int(np.max(np.abs(result.view(np.int32).astype(np.int64) - expected.view(np.int32).astype(np.int64))))
    print(f"matches numpy: {ulps <= 4} (largest difference {ulps} ulp; kernels use their own vectorised tanh)")

    S, X, T = rng.uniform(10, 100, 5), rng.uniform(10, 100, 5), rng.uniform(0.1, 2, 5)
    prices = flowjit.jit(black_scholes)(S, X, T)
    print("\nblack_scholes call prices:", np.array2string(prices, precision=4))
    print("max |flowjit - numpy|:", float(np.max(np.abs(prices - black_scholes(S, X, T)))))


if __name__ == "__main__":
    main()
