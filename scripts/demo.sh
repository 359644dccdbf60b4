#!/usr/bin/env bash
# demo.sh: the quick start: 4 ranks, each a virtual GPU, training the default
# model. Builds first when needed. Extra arguments go to vgpu_train.
set -euo pipefail
cd "$(dirname "$0")/.."
np=${VGPU_NP:-4}
[ -x build/vgpu_train ] || scripts/setup.sh
exec scripts/mpirun.sh -np "$np" build/vgpu_train configs/default.ini "$@"
