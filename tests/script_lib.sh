# shellcheck shell=bash
# script_lib.sh: helpers for the script tests run from tests/ (sourced:
# `. "$(dirname "$0")/script_lib.sh"`), the GPT's comparisons with PyTorch.
# tests/e2e/lib.sh is the end-to-end tests' (it needs ctest's variables and
# makes their work and shared-memory folders); this is only the checks and
# their verdict, so the scripts also run by hand.
#
# Each check is `ok WHAT` or `bad WHAT` (which shows the last lines of $out);
# `finish` prints the count and is the script's status when it ends it: 0
# when no check failed, else 1. `skip WHY` exits 77, which ctest reports as
# skipped (SKIP_RETURN_CODE in tests/CMakeLists.txt).

PY=${VGPU_PYTHON:-/usr/bin/python3} # Debian's python3-torch lives under /usr/bin/python3
RUN_LIMIT_S=300 # run's bound on one command, seconds (a script may set its own)
checks=0 failures=0
out=""

ok() { checks=$((checks + 1)); echo "ok: $*"; }
bad() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAILED: $*"; printf '%s\n' "$out" | tail -20; }
skip() { echo "SKIP: $*"; exit 77; }

# run NAME CMD...: runs CMD (bounded by RUN_LIMIT_S), its output in $out; a
# failure is reported.
run() {
  local name=$1 rc=0
  shift
  out=$(timeout "$RUN_LIMIT_S" "$@" 2>&1) || rc=$?
  if [ $rc = 0 ]; then ok "$name"; else bad "$name (exit $rc)"; fi
}

# need_torch: skips the test unless $PY imports PyTorch and NumPy.
need_torch() {
  [ -x "$PY" ] || skip "$PY not found (apt-get install python3, or set VGPU_PYTHON)"
  "$PY" -c 'import torch, numpy' 2>/dev/null ||
    skip "PyTorch or NumPy not importable by $PY (apt-get install python3-torch)"
}

finish() {
  echo "$((checks - failures)) passed, $failures failed"
  [ "$failures" = 0 ]
}
