#!/usr/bin/env bash
# test.sh: build (installing what is missing) and run the test suite.
# Extra arguments go to ctest (e.g. -L unit, -R ring, -LE slow).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh ${VGPU_CMAKE_ARGS:-}
cd "${VGPU_BUILD_DIR:-build}"
ctest --output-on-failure -j"$(nproc)" "$@"
