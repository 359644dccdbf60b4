#!/usr/bin/env bash
# ci_extra.sh: the CI checks beyond the main test run: (1) the unit and mpi
# tests built with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan),
# (2) each libFuzzer target for a bounded time from its seed corpus
# (build-fuzz, clang). Prints one summary line per step; exits non-zero if any
# failed. FUZZ_SECONDS (default 20) bounds each fuzzer.
set -uo pipefail
cd "$(dirname "$0")/.."
fuzz_seconds=${FUZZ_SECONDS:-20}
jobs=$(nproc)
summary=()
failed=0
note() { summary+=("$1"); echo "ci_extra: $1"; }

# ---- sanitizers ----
# The CUDA configuration as it is built (CUDA and NCCL when found): nvcc takes
# no -fsanitize, so its objects are plain and the C around them runs under
# ASan, which is how a CUDA build's CPU path is checked. Multi-rank faults tests are
# left out: their time bounds say nothing under ASan's slowdown, and the main
# run has them. Open MPI itself leaks at exit, so leak checks stay on for the unit
# tests (no MPI) and off under mpirun.
t0=$SECONDS
mkdir -p build-asan build-fuzz
if cmake -B build-asan -S . -DVGPU_SANITIZE=ON >build-asan/configure.log 2>&1 &&
   cmake --build build-asan -j"$jobs" >build-asan/build.log 2>&1; then
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  (cd build-asan && ctest --output-on-failure --no-tests=error -j"$jobs" -L unit -LE 'slow|cluster|gpu$')
  unit_rc=$?
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure --no-tests=error -j"$jobs" \
     -L mpi -LE 'unit|faults|slow|cluster|gpu$')
  mpi_rc=$?
  if [ $unit_rc = 0 ] && [ $mpi_rc = 0 ]; then
    note "sanitizers: unit and mpi tests pass under ASan+UBSan ($((SECONDS - t0)) s)"
  else
    note "sanitizers: FAILED (unit rc=$unit_rc, mpi rc=$mpi_rc; $((SECONDS - t0)) s)"
    failed=1
  fi
else
  tail -20 build-asan/configure.log 2>/dev/null
  grep -E -A5 'error' build-asan/build.log 2>/dev/null | head -40
  note "sanitizers: FAILED to build build-asan"
  failed=1
fi

# ---- fuzzers ----
if ! command -v clang >/dev/null; then
  note "fuzzers: FAILED: clang not found (apt-get install clang)"
  exit 1
fi
t0=$SECONDS
if cmake -B build-fuzz -S . -DCMAKE_C_COMPILER=clang -DVGPU_FUZZ=ON -DVGPU_SANITIZE=ON -DVGPU_TESTS=OFF \
     -DVGPU_CUDA=OFF -DVGPU_NCCL=OFF >build-fuzz/configure.log 2>&1 &&
   cmake --build build-fuzz -j"$jobs" --target fuzz_config fuzz_idx fuzz_checkpoint \
     >build-fuzz/build.log 2>&1; then
  for target in config idx checkpoint; do
    # New inputs go to a scratch corpus, so the checked-in seeds stay as they are;
    # a crash is written next to the build as build-fuzz/crash-<hash>.
    scratch=$(mktemp -d /tmp/vgpu-fuzz.XXXXXX)
    log=build-fuzz/fuzz_$target.log
    build-fuzz/fuzz_$target -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix=build-fuzz/ "$scratch" "tests/fuzz/corpus/$target" \
      >"$log" 2>&1
    rc=$?
    rm -rf "$scratch"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    if [ $rc = 0 ]; then
      note "fuzz_$target: ${runs:-?} inputs in ${fuzz_seconds} s, no crash"
    else
      grep -E -A25 '^==[0-9]+==ERROR|runtime error|deadly signal' "$log" | head -40
      note "fuzz_$target: FAILED (exit $rc; reproducer: $(grep -o 'build-fuzz/[a-z]*-[0-9a-f]*' "$log" | tail -1); log $log)"
      failed=1
    fi
  done
  note "fuzzers: done in $((SECONDS - t0)) s"
else
  tail -20 build-fuzz/configure.log 2>/dev/null
  grep -E -A5 'error' build-fuzz/build.log 2>/dev/null | head -40
  note "fuzzers: FAILED to build build-fuzz"
  failed=1
fi

echo "ci_extra: summary"
printf '  %s\n' "${summary[@]}"
exit $failed
