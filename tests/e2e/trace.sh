#!/usr/bin/env bash
# trace.sh: vgpu_train --trace writes one Chrome trace-event JSON file for the
# whole job (trace_check.py: it parses; a process and the steps of every rank;
# spans nest; each collective overlaps across the ranks within the measured
# clock skew). scripts/trace_summary.py names a slowed rank as the one the
# others wait for. A preempted job writes its trace too; a path that cannot
# be written is refused before training; the summary refuses what is not a
# trace.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/faults_lib.sh"
command -v python3 >/dev/null || skip "python3 not found (apt-get install python3)"
CHECK=(python3 "$(dirname "$0")/trace_check.py")
SUMMARY="$VGPU_SOURCE_DIR/scripts/trace_summary.py"
t=$WORK/t.json

# ---- the issue's command, shortened: 4 ranks, checkpoints, evaluation ----
run "default.ini --trace, 4 ranks" 120 "$MPIRUN" -np 4 "$TRAIN" "$CONFIGS/default.ini" --quiet \
  --set train.max_steps=60 --set checkpoint.every_steps=30 --set "checkpoint.dir=$WORK/ck" --trace "$t"
expect_rc 0
expect_out "^vgpu: timeline $t: [0-9]+ spans from 4 ranks, clocks aligned within [0-9]+ us\$"
out=$("${CHECK[@]}" "$t" 4 60 --same-clock --names data,forward,backward,optimizer,wait,\
"ring reduce-scatter","ring all-gather",all-reduce+update,control-reduce,evaluation,checkpoint)
if [ $? = 0 ]; then ok "trace_check: $(grep -c '^ok' <<<"$out") checks"; else bad "trace_check"; fi
run "trace_summary" 30 "$SUMMARY" "$t"
expect_rc 0
expect_out "^trace $t: 4 ranks, 60 steps, clocks aligned within [0-9]+ us, 0 spans dropped\$"
for r in 0 1 2 3; do expect_out "^rank $r( +[0-9]+\.[0-9]{3}){8}\$"; done

# ---- a slowed rank: the others wait for it ----
run "rank 2 slowed x4, 3 ranks, --trace" 120 env VGPU_INJECT_SLOW=2:4 "$MPIRUN" -np 3 "$TRAIN" \
  "$CONFIGS/default.ini" --quiet --set train.max_steps=40 --trace "$t"
expect_rc 0
out=$("${CHECK[@]}" "$t" 3 40 --same-clock --names "injected slowness")
if [ $? = 0 ]; then ok "trace_check (a slowed rank)"; else bad "trace_check (a slowed rank)"; fi
slowed=$(python3 -c 'import json,sys; print(sorted({e["pid"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("name") == "injected slowness"}))' "$t")
if [ "$slowed" = "[2]" ]; then ok "'injected slowness' on rank 2 only"; else bad "injected slowness on $slowed"; fi
run "trace_summary names the slow rank" 30 "$SUMMARY" "$t"
expect_rc 0
last=$(grep -oE '^last into a step.s collective: rank [0-9]+ in [0-9]+ of 40' <<<"$out")
n=$(grep -oE 'in [0-9]+ of' <<<"$last" | grep -oE '[0-9]+')
if [[ $last == *"rank 2 in"* ]] && [ "${n:-0}" -ge 36 ]; then ok "$last"; else bad "slow rank 2 not last: '$last'"; fi
run "trace_summary --tsv" 30 "$SUMMARY" "$t" --tsv
expect_rc 0
expect_out $'^rank\tdata\tforward\tbackward\toptimizer\twait\tmove\tother$'
expect_out $'^2(\t[0-9]+\\.[0-9]{4}){7}$'

# ---- preempted: the trace of the steps it made ----
rm -f "$t"
start_job preempted 4 --trace "$t"
if wait_for_checkpoints 1 30; then
  mark
  kill -USR1 "$job"
  wait_job 30
  expect_rc 75
  expect_out "^vgpu: timeline $t: [0-9]+ spans from 4 ranks"
  steps=$(grep -oE 'preempted at step [0-9]+' <<<"$out" | grep -oE '[0-9]+$')
  out=$("${CHECK[@]}" "$t" 4 "${steps:-0}" --same-clock)
  if [ $? = 0 ]; then ok "the preempted job's trace holds its $steps steps"; else bad "preempted trace_check"; fi
else
  out=$(cat "$job_out"); bad "no checkpoint within 30 s"
fi
expect_nothing_left

# ---- deterministic mode (the tree all-reduce), one rank; bad paths ----
run "deterministic --trace, 2 ranks" 60 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" \
  --quiet --set train.max_steps=20 --set train.deterministic=true --trace "$t"
expect_rc 0
out=$("${CHECK[@]}" "$t" 2 20 --same-clock --names data,forward,backward,optimizer,all-reduce-tree)
if [ $? = 0 ]; then ok "trace_check (tree all-reduce)"; else bad "trace_check (tree all-reduce)"; fi
run "one rank --trace" 60 "$MPIRUN" -np 1 "$TRAIN" "$CONFIGS/synthetic_small.ini" --quiet \
  --set train.max_steps=10 --trace "$t"
expect_rc 0
out=$("${CHECK[@]}" "$t" 1 10 --same-clock)
if [ $? = 0 ]; then ok "trace_check (1 rank)"; else bad "trace_check (1 rank)"; fi
run "--trace into a missing directory" 60 "$MPIRUN" -np 2 "$TRAIN" "$CONFIGS/synthetic_small.ini" \
  --trace "$WORK/none/t.json"
expect_rc 2
expect_out "timeline $WORK/none/t.json: cannot write: No such file or directory"
expect_no_out '^epoch '
run "--trace ''" 20 "$TRAIN" "$CONFIGS/synthetic_small.ini" --trace ''
expect_rc 2
expect_out 'option --trace needs a path'
head -c 2000 "$t" >"$WORK/cut.json"
run "trace_summary: a cut-off file" 20 "$SUMMARY" "$WORK/cut.json"
expect_rc 2
expect_out "is not JSON"
echo '{"traceEvents": []}' >"$WORK/other.json"
run "trace_summary: not a vgpu trace" 20 "$SUMMARY" "$WORK/other.json"
expect_rc 2
expect_out "is not a vgpu_train --trace file"
finish
