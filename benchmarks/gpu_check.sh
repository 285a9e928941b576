#!/usr/bin/env bash
# Installs the CUDA build of JAX from the package registry, then runs benchmarks/gpu_check.py:
# every sample and the runtime benchmarks on the GPU and on the CPU, in one table.
#
#   benchmarks/gpu_check.sh [gpu_check.py options]
#
# PYTHON picks the interpreter (default: python, e.g. the project's venv activated);
# GPU_CHECK_SKIP_INSTALL=1 leaves the installed JAX as it is (on a machine without a GPU the
# table's GPU columns say "no GPU").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
if [[ "${GPU_CHECK_SKIP_INSTALL:-0}" != 1 ]]; then
    "$PYTHON" -m pip install -U "jax[cuda12]"
fi
"$PYTHON" -c 'import jax; print("jax", jax.__version__, "devices:", jax.devices())'
exec "$PYTHON" benchmarks/gpu_check.py "$@"
