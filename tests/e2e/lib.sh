# lib.sh: helpers for the end-to-end tests (sourced). Each test runs real
# programs under scripts/mpirun.sh and checks exit status, output and time.
set -uo pipefail
: "${VGPU_BUILD_DIR:?run through ctest (VGPU_BUILD_DIR unset)}"
: "${VGPU_SOURCE_DIR:?run through ctest (VGPU_SOURCE_DIR unset)}"
TRAIN="$VGPU_BUILD_DIR/vgpu_train"
MPIRUN="$VGPU_SOURCE_DIR/scripts/mpirun.sh"
CONFIGS="$VGPU_SOURCE_DIR/configs"
WORK=$(mktemp -d /tmp/vgpu-e2e.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
# A failing job's flight records go to the test's own directory.
export VGPU_FLIGHT_DIR="$WORK/flight"
FLIGHT="$VGPU_BUILD_DIR/vgpu-flight"
failures=0
checks=0

# run NAME TIMEOUT_S CMD...: runs CMD with a time bound; sets $out, $rc, $secs.
run() {
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s.%N)
  out=$(timeout -k 5 "$limit" "$@" 2>&1)
  rc=$?
  secs=$(echo "$(date +%s.%N) - $t0" | bc)
  echo "--- $name: exit $rc after ${secs}s"
}

ok() { checks=$((checks + 1)); echo "ok   $*"; }
bad() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL $*"; echo "$out" | tail -25 | sed 's/^/     | /'; }

expect_rc() { if [ "$rc" = "$1" ]; then ok "exit status $1"; else bad "exit status $rc, expected $1"; fi; }
expect_nonzero() { if [ "$rc" != 0 ] && [ "$rc" != 124 ]; then ok "exit status $rc (non-zero)"; else bad "exit status $rc, expected a failure that is not a timeout"; fi; }
expect_out() { if grep -qE -- "$1" <<<"$out"; then ok "output matches /$1/"; else bad "output lacks /$1/"; fi; }
expect_no_out() { if grep -qE -- "$1" <<<"$out"; then bad "output has /$1/"; else ok "output has no /$1/"; fi; }
# Open MPI's report after a non-zero exit (framed in lines of dashes): the
# launchers leave it out on one host (mpirun -q) when the ranks have said why.
expect_no_banner() { expect_no_out '^-{20,}$|Primary job +terminated|mpirun (detected|noticed)'; }
expect_within() { if [ "$(echo "$secs <= $1" | bc)" = 1 ]; then ok "within $1 s"; else bad "took ${secs}s, bound $1 s"; fi; }
# What /dev/shm held when the test started: another job's segments (vgpu's
# own shared memory has no names; Open MPI's has) are not this test's.
SHM_AT_START=$(ls /dev/shm 2>/dev/null)
# expect_no_shm: nothing the test's jobs created is left in /dev/shm: no
# entry of vgpu's or of Open MPI's shared-memory transport that appeared since
# the test started and that no live process maps (a mapped one belongs to a
# job still running, perhaps someone else's).
expect_no_shm() {
  local left="" f
  for f in $(ls /dev/shm 2>/dev/null | grep -E '^(vgpu-|vader_segment\.)' | grep -vxF -f <(echo "$SHM_AT_START")); do
    grep -qsF "/dev/shm/$f" /proc/[0-9]*/maps || left="$left $f"
  done
  if [ -z "$left" ]; then ok "nothing left in /dev/shm"; else bad "left in /dev/shm:$left"; fi
}
# skip REASON: ctest reports the test as skipped (exit 77); scripts/test.sh
# lists the reason at the end.
skip() { echo "SKIP: $*"; exit 77; }
finish() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" = 0 ]
}
