#!/usr/bin/env bash
# suite_verdict.sh: the suite's own machinery can fail. scripts/test.sh and
# .ci/run, copied as they are into a throw-away project of a few shell
# tests, must exit non-zero when a test fails, times out, cannot run, is
# skipped without leave (CI allows only the GPU tests), or when no test
# matches; and zero when every test passes. One test of that project is
# planted through VERDICT_PLANT (read at configure time: setup.sh configures
# again on every run). scripts/ci_extra.sh (sanitizers, fuzzers of this
# project) is replaced there by a stand-in that records that it ran and
# exits with VERDICT_EXTRA_RC: what is checked is that .ci/run reaches it
# only after a passing suite, and passes on its status; install_packages.sh
# by one that installs nothing.
source "$(dirname "$0")/lib.sh"
SRC=$VGPU_SOURCE_DIR
P=$WORK/project
mkdir -p "$P/scripts" "$P/.ci"
cp "$SRC/scripts/test.sh" "$SRC/scripts/setup.sh" "$P/scripts/"
cp "$SRC/.ci/run" "$P/.ci/run"
# Packages are not what is checked here: a stand-in that installs nothing
# (the real one would install clang for .ci/run, or fail without root).
printf '#!/bin/sh\n' >"$P/scripts/install_packages.sh"
# The stand-in for the sanitizer and fuzzer stage: it ran, and its status.
printf '#!/bin/sh\necho "ci_extra stand-in ran"\nexit "${VERDICT_EXTRA_RC:-0}"\n' \
  >"$P/scripts/ci_extra.sh"
chmod +x "$P/scripts/install_packages.sh" "$P/scripts/ci_extra.sh"
cat >"$P/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.20)
project(verdict NONE)
enable_testing()
add_test(NAME passes COMMAND sh -c "echo fine")
set(plant "$ENV{VERDICT_PLANT}")
if(plant STREQUAL "fail")
  add_test(NAME planted COMMAND sh -c "echo wrong; exit 1")
elseif(plant STREQUAL "timeout")
  add_test(NAME planted COMMAND sleep 30)
  set_tests_properties(planted PROPERTIES TIMEOUT 1)
elseif(plant STREQUAL "notrun")
  add_test(NAME planted COMMAND ${CMAKE_BINARY_DIR}/never_built)
elseif(plant STREQUAL "skip")
  add_test(NAME planted COMMAND sh -c "echo 'SKIP: planted reason'; exit 77")
  set_tests_properties(planted PROPERTIES SKIP_RETURN_CODE 77)
elseif(plant STREQUAL "skip_gpu")
  add_test(NAME test_device_cuda COMMAND sh -c "echo 'SKIP: no GPU'; exit 77")
  set_tests_properties(test_device_cuda PROPERTIES SKIP_RETURN_CODE 77)
endif()
EOF
# The throw-away project is built by its own scripts in its own build/.
unset VGPU_BUILD_DIR VGPU_CMAKE_ARGS VGPU_SOURCE_DIR

# verdict NAME PLANT EXTRA_RC CMD...: runs CMD in the project with the plant.
verdict() {
  local name=$1 plant=$2 extra=$3
  shift 3
  run "$name" 120 env VERDICT_PLANT="$plant" VERDICT_EXTRA_RC="$extra" "$@"
}
# ctest's own status for failed, timed-out and not-run tests (8 on cmake 3.25).
for plant in fail timeout notrun; do
  verdict "test.sh, planted $plant" $plant 0 "$P/scripts/test.sh"
  expect_nonzero
  expect_out "The following tests FAILED:"
  expect_out "test.sh: FAILED \(ctest exit status $rc;"
  verdict ".ci/run, planted $plant" $plant 0 "$P/.ci/run"
  expect_nonzero
  expect_no_out "ci_extra stand-in ran"
done
verdict "test.sh, planted fail: its log" fail 0 "$P/scripts/test.sh"
if grep -q '^wrong$' "$P/build/ctest.log"; then ok "ctest.log holds the failing test's output"
else bad "ctest.log lacks the failing test's output"; fi

# No test matched: ctest's "No tests were found" is a failure.
verdict "test.sh -R no_such_test" none 0 "$P/scripts/test.sh" -R no_such_test
expect_nonzero
expect_out "No tests were found"

# A skip: test.sh passes and lists it with its reason; .ci/run refuses it,
# except for the GPU test.
verdict "test.sh, planted skip" skip 0 "$P/scripts/test.sh"
expect_rc 0
expect_out "^  planted: planted reason$"
verdict ".ci/run, planted skip" skip 0 "$P/.ci/run"
expect_nonzero
expect_out ".ci/run: FAILED: the tests above were skipped"
expect_no_out "ci_extra stand-in ran"
verdict ".ci/run, the GPU test skipped" skip_gpu 0 "$P/.ci/run"
expect_rc 0
expect_out "ci_extra stand-in ran"

# Everything passes: .ci/run passes, and only then its last stage decides.
verdict ".ci/run, nothing planted" none 0 "$P/.ci/run"
expect_rc 0
expect_out "100% tests passed, 0 tests failed out of 1"
expect_out "ci_extra stand-in ran"
verdict ".ci/run, its last stage failing" none 3 "$P/.ci/run"
expect_rc 3
finish
