#!/usr/bin/env bash
# bench_gemm.sh: single-thread sgemm GFLOP/s of the CPU GEMM libraries Debian
# offers (OpenBLAS, BLIS, oneDNN) and of this build's device op, on the exact
# GEMM shapes of the MLP trainer at per-rank batch 256 and 128
# (vgpu_gemm_perf; the libraries that are installed, loaded side by side).
# Usage: scripts/bench_gemm.sh [build-dir] [vgpu_gemm_perf options, e.g. --trials 15]
# OpenBLAS picks its kernels from the environment when it loads, so compare
# kernel sets with two runs, e.g.  OPENBLAS_CORETYPE=Haswell scripts/bench_gemm.sh
# (this script leaves OPENBLAS_* as it finds them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
shift || true
perf=$build/vgpu_gemm_perf
[ -x "$perf" ] || { echo "bench_gemm: $perf not built (scripts/setup.sh)" >&2; exit 2; }
echo "# OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-<unset>}; missing libraries: apt-get install libblis-dev libdnnl-dev"
exec "$perf" "$@"
