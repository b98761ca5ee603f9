#!/usr/bin/env bash
# The GPU checks, in one go, on a machine with an NVIDIA GPU and the packages of the cuda extra
# (numba-cuda, CuPy) already installed: the CUDA tests on the real device, the launch paths'
# dispatch times, and `flowjit bench` with the GPU modes.  Everything is written under OUT
# (default ./gpu-out): tests.log, dispatch.txt, first.txt, sweep.txt, bench.txt, results-gpu.json.
#
#   tools/gpu_check.sh [tests|dispatch|first|sweep|bench|all]...      (default: all)
#
# PYTHON picks the interpreter (default python3).  numba-cuda 0.30.4 needs np.row_stack, which
# numpy 2.5 removed: flowjit.gpu aliases it.  Should numba itself refuse the numpy it finds,
# wheels in .whl/ (a numpy it accepts) are installed into /tmp/site first.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} NUMBA_ENABLE_CUDASIM=0 PYTHONUNBUFFERED=1
if ! $PYTHON -c "import numba, flowjit.gpu as g; g.numba_cuda()" 2>"$OUT/import.log"; then
    echo "numba or numba-cuda does not import with this numpy ($(cat "$OUT/import.log" | tail -1)); installing .whl/"
    $PYTHON -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
nvidia-smi -L | tee "$OUT/machine.txt"
$PYTHON -c "import numpy, numba, numba_cuda, cupy; print('numpy', numpy.__version__, 'numba', numba.__version__, \
'numba-cuda', numba_cuda.__version__, 'cupy', cupy.__version__)" | tee -a "$OUT/machine.txt"

steps=${*:-all}
for step in $steps; do
    case $step in
    tests|all)
        $PYTHON -m pytest -p no:cacheprovider -q -n 8 -rfEs tests/cuda 2>&1 | tail -200 | tee "$OUT/tests.log" ;;&
    dispatch|all)
        $PYTHON -m flowjit.bench.gpu_modes 2>&1 | tee "$OUT/dispatch.txt" ;;&
    first|all)
        $PYTHON -m flowjit.bench.gpu_modes first 2>&1 | tee "$OUT/first.txt" ;;&
    sweep|all)
        $PYTHON -m flowjit.bench.gpu_modes sweep 2>&1 | tee "$OUT/sweep.txt" ;;&
    bench|all)
        $PYTHON -m flowjit.cli bench --workloads chain,gelu,softmax,layernorm --sizes 64M \
            --modes gpu-fused,gpu-unfused,cupy,cupy-kernel,jax ${TORCH:+--modes gpu-fused,gpu-unfused,cupy,cupy-kernel,jax,torch-gpu} \
            --repeat 20 --compile-repeat 1 --json "$OUT/results-gpu.json" 2>"$OUT/bench.err" | tee "$OUT/bench.txt"
        $PYTHON -m flowjit.cli bench --workloads black_scholes --sizes 16M --no-compile-rows \
            --modes gpu-fused,gpu-unfused,cupy,jax --repeat 20 --json "$OUT/results-gpu-f64.json" 2>>"$OUT/bench.err" \
            | tee -a "$OUT/bench.txt" ;;
    esac
done
