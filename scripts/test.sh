#!/usr/bin/env bash
# test.sh: build (installing what is missing) and run the test suite.
# Extra arguments go to ctest (e.g. -L unit, -R ring, -LE slow).
# The cluster tests need a local Slurm and network namespaces: their packages
# are installed too when running as root; otherwise those tests are skipped
# and the summary at the end says so, with the command that enables them.
set -euo pipefail
cd "$(dirname "$0")/.."
test_packages=(slurm-wlm munge iproute2 tmux python3 python3-torch gnuplot-nox)
scripts/install_packages.sh --optional "${test_packages[@]}"
scripts/setup.sh ${VGPU_CMAKE_ARGS:-}
cd "${VGPU_BUILD_DIR:-build}"
# The verdict is ctest's status: non-zero when a test failed, timed out or
# could not run, or when no test matched the arguments. It is read in the
# `||` branch, before any other command replaces PIPESTATUS (a `|| true`
# here once made every run pass); a log that could not be written fails too.
rc=0
ctest --output-on-failure --no-tests=error -j"$(nproc)" "$@" 2>&1 | tee ctest.log ||
  { statuses=("${PIPESTATUS[@]}"); rc=${statuses[0]}; [ "$rc" != 0 ] || rc=${statuses[1]}; }

# Every skipped test with its reason (the "SKIP: ..." line it printed), also
# kept in skipped_tests.txt (CI allows only the GPU test there).
awk 'FNR == NR { if ($0 ~ /^[0-9]+\/[0-9]+ Test: /) name = $3
                 else if ($0 ~ /^SKIP: /) { sub(/^SKIP: /, ""); why[name] = $0 }
                 next }
     /^[ \t]+[0-9]+ - .* \(Skipped\)$/ {
       print "  " $3 ": " (($3 in why) ? why[$3] : "(no reason printed)") }' \
  Testing/Temporary/LastTest.log ctest.log >skipped_tests.txt
if [ -s skipped_tests.txt ]; then
  echo "test.sh: skipped tests:"
  cat skipped_tests.txt
  if grep -q '^  cluster_' skipped_tests.txt; then
    echo "test.sh: the cluster tests need root and ${test_packages[*]}:" \
         "run scripts/test.sh as root (it installs them) or apt-get install them"
  fi
fi
if [ "$rc" != 0 ]; then
  echo "test.sh: FAILED (ctest exit status $rc; log: ${VGPU_BUILD_DIR:-build}/ctest.log)" >&2
fi
exit "$rc"
