#!/usr/bin/env bash
# projection.sh: vgpu-project end to end. A short real run's --trace (2
# ranks) is projected onto every shipped target (configs/targets/), with
# this machine calibrated once (scripts/project_calibrate.sh): a row per GPU
# count up to the target's size, each under a second; the 1-GPU row of a
# target of this machine equals the trace's compute; bad input is refused
# with a message that names it (a cut-off trace, a trace of no collectives,
# a target missing a key, a key out of range, more GPUs than the target's,
# another device without the measured machine's file),
# and --plot draws a picture (its part skipped without gnuplot).
source "$(dirname "$0")/lib.sh"
PROJECT="$VGPU_BUILD_DIR/vgpu-project"
TARGETS="$VGPU_SOURCE_DIR/configs/targets"
t=$WORK/t.json
cal=$WORK/calibration.ini

run "vgpu_train --trace, 2 ranks, 20 steps" 120 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/default.ini" \
  --quiet --set train.max_steps=20 --trace "$t"
expect_rc 0
if grep -q '"flops":[1-9]' "$t" && grep -q '"device_bytes@8":' "$t"; then
  ok "the trace carries the model's FLOPs and its sizing notes"
else
  bad "the trace lacks FLOPs or notes"
fi
run "calibrate this machine" 120 env VGPU_BUILD_DIR="$VGPU_BUILD_DIR" \
  "$VGPU_SOURCE_DIR/scripts/project_calibrate.sh" "$cal"
expect_rc 0
expect_out "^project_calibrate: $cal: [0-9.]+ GFLOP/s, memory [0-9.]+ GB/s, [0-9.]+ us an operation's call, shared memory alpha [0-9.]+ us, [0-9.]+ Gbit/s\$"
expect_out_file() { if grep -qE "$2" "$1"; then ok "$1 has '$2'"; else bad "$1 lacks '$2'"; fi; }
for key in launch_us kernel_min_us sync_us host_link_gbyte_per_s; do
  expect_out_file "$cal" "^$key = [0-9.]+\$"
done
if grep -q '"name":"gemm ops","cat":"device"' "$t"; then
  ok "the trace counts the device operations"
else
  bad "the trace has no 'gemm ops' counts"
fi

# ---- every shipped target ----
row='^ +[0-9]+ +[0-9]+( +[0-9]+\.[0-9]{4}){4} +([0-9]+|-) +[0-9]+% +[0-9.]+[KMG] +[a-z]'
for f in "$TARGETS"/*.ini; do
  name=$(basename "$f" .ini)
  run "onto $name" 10 "$PROJECT" --trace "$t" --target "$f" --measured-on "$cal"
  expect_rc 0
  expect_within 1
  size=$(awk -F' *= *' '$1 == "hosts" { h = $2 } $1 == "gpus_per_host" { g = $2 } END { print h * g }' "$f")
  want=$(awk -v s="$size" 'BEGIN { n = 0; for (k = 1; k < s; k *= 2) n++; print n + 1 }')
  got=$(grep -cE "$row" <<<"$out")
  if [ "$got" = "$want" ]; then ok "$name: $got rows (1, 2, 4, ... $size GPUs)"; else bad "$name: $got rows, expected $want"; fi
  expect_out "^ +$size +[0-9]+ "
  expect_out "^ +1 +1 .* 100% "
done

# A target of this machine, compute as measured: its 1-GPU row is the
# measured compute a sample times the global batch, no collective.
run "onto this machine, --ranks 1,2" 10 "$PROJECT" --trace "$t" --target "$TARGETS/local_ns_1gbit.ini" \
  --measured-on "$cal" --ranks 1,2
expect_rc 0
one=$(awk '$1 == 1 && $2 == 1 { print $5 }' <<<"$out")
if [ "$one" = "0.0000" ]; then ok "1 GPU: no communication"; else bad "1 GPU: communication $one ms"; fi
expect_out "^ +2 +1 "

# ---- bad input ----
# The lanes (issue 47): the default job on one H100 is bound by its host
# lane: its launches (22 x 4 us), or, where this machine's own host work is
# slower than that (a sanitized build: 0.108 ms), that work; a trace without
# the counted operations (before issue 47) falls back, and says so.
run "onto one H100: the lanes" 10 "$PROJECT" --trace "$t" --target "$TARGETS/h100_nvlink_8.ini" \
  --measured-on "$cal" --ranks 1
expect_rc 0
expect_out "^  lanes: [0-9]+ operations a step a rank \\([0-9]+ GEMM"
expect_out "^ +1 +1 .* (launches|host work) \\(host lane\\)\$"
expect_out "^  (launches \\(host lane\\): launch-bound: 4.00 us a launch|host work \\(host lane\\): the host's own work)"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d["traceEvents"] = [e for e in d["traceEvents"] if e.get("cat") != "device"]
json.dump(d, open(sys.argv[2], "w"))' "$t" "$WORK/old.json"
run "a trace without counted operations" 10 "$PROJECT" --trace "$WORK/old.json" \
  --target "$TARGETS/h100_nvlink_8.ini" --measured-on "$cal" --ranks 1
expect_rc 0
expect_out "^  lanes: none: the trace counts no device operations"
expect_out "^ +1 +1 .* memory bandwidth|compute\$"

head -c 3000 "$t" >"$WORK/cut.json"
run "a cut-off trace" 10 "$PROJECT" --trace "$WORK/cut.json" --target "$TARGETS/h100_nvlink_8.ini" --measured-on "$cal"
expect_rc 2
expect_out "cut.json is not whole JSON: the text ends at byte 3000"
# The same trace with its collectives renamed to what no collective is called.
sed -E 's/"name":"(all-reduce\+update|all-reduce|broadcast|control-[a-z]+)"/"name":"renamed"/' "$t" >"$WORK/none.json"
run "a trace with no collectives" 10 "$PROJECT" --trace "$WORK/none.json" --target "$TARGETS/h100_nvlink_8.ini" --measured-on "$cal"
expect_rc 2
expect_out "none.json has no collectives inside its steps: nothing to project"
printf '[target]\nhosts = 2\ngpus_per_host = 4\n[device]\nfp32_tflops = 10\n[intra]\ngbit_per_s = 8\n' >"$WORK/no_net.ini"
run "a target without its network" 10 "$PROJECT" --trace "$t" --target "$WORK/no_net.ini" --measured-on "$cal"
expect_rc 2
expect_out "inter.gbit_per_s is missing: 2 hosts need the network between them"
run "a key out of range" 10 "$PROJECT" --trace "$t" --target "$TARGETS/h100_nvlink_8.ini" \
  --measured-on "$cal" --set target.gpus_per_host=65
expect_rc 2
expect_out "target.gpus_per_host"
run "more GPUs than the target has" 10 "$PROJECT" --trace "$t" --target "$TARGETS/rtx4090_pcie_4.ini" \
  --measured-on "$cal" --ranks 1,8
expect_rc 2
expect_out "--ranks 8: the target has 4 GPUs"
run "another device, no measured machine" 10 "$PROJECT" --trace "$t" --target "$TARGETS/h100_nvlink_8.ini"
expect_rc 2
expect_out "give the measured machine with --measured-on FILE"
run "--help" 10 "$PROJECT" --help
expect_rc 0
expect_out "^usage: vgpu-project --trace TRACE.json --target TARGET.ini"

# ---- the plot ----
if command -v gnuplot >/dev/null; then
  run "--plot" 30 "$PROJECT" --trace "$t" --target "$TARGETS/h100_ib400_2x4.ini" --measured-on "$cal" \
    --plot "$WORK/p.png"
  expect_rc 0
  if [ "$(head -c 4 "$WORK/p.png" | od -An -c | tr -d ' ')" = '211PNG' ]; then ok "a PNG"; else bad "no PNG"; fi
else
  echo "SKIP part: --plot (gnuplot not found: apt-get install gnuplot-nox)"
fi
finish
