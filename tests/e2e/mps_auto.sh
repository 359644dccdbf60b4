#!/usr/bin/env bash
# mps_auto.sh: vgpurun starts the job's MPS daemon by itself where ranks
# share a GPU in Default mode (issue 43), says why it did or did not, and
# leaves no daemon however the job ends: a finished job, a rank that fails,
# SIGTERM, and kill -9 of vgpurun itself (its watcher stops the daemon). No
# GPU and no real MPS: simulated GPUs (VGPU_SIM_GPUS) and a fake
# nvidia-cuda-mps-control first on PATH that records its calls.
source "$(dirname "$0")/lib.sh"
VGPURUN=$VGPU_BUILD_DIR/vgpurun
FAKE=$WORK/bin
LOG=$WORK/mps.log
mkdir -p "$FAKE"
# The fake: `-d` starts a "daemon" (a sleep, its pid where the real one
# writes it) and returns; otherwise it reads commands, and `quit` ends the
# daemon. Every call and command goes to $LOG with the pipe directory.
cat >"$FAKE/nvidia-cuda-mps-control" <<'EOF'
#!/bin/sh
log=${FAKE_MPS_LOG:?}
echo "args:$* pipe:${CUDA_MPS_PIPE_DIRECTORY-unset}" >>"$log"
if [ "${1-}" = -d ]; then
  if [ -n "${FAKE_MPS_FAIL-}" ]; then echo "fake: cannot start" >"$CUDA_MPS_LOG_DIRECTORY/control.log"; exit 1; fi
  sleep 300 </dev/null >/dev/null 2>&1 &
  echo $! >"$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
  echo "daemon:$!" >>"$log"
  echo "$! $CUDA_MPS_PIPE_DIRECTORY" >>"$log.all" # for the clean-up after a failure
  exit 0
fi
while read -r cmd; do
  echo "stdin:$cmd" >>"$log"
  [ "$cmd" = quit ] && kill "$(cat "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid")"
done
exit 0
EOF
chmod +x "$FAKE/nvidia-cuda-mps-control"
WITH_FAKE="PATH=$FAKE:$PATH"

# alive PID: it runs (a zombie no one reaps has ended).
alive() { [ -n "$1" ] && grep -qsE '^State:[[:space:]]+[^ZX[:space:]]' "/proc/$1/status"; }
daemon_pid() { sed -n 's/^daemon://p' "$LOG" | tail -1; }
mps_dir() { sed -n 's|^args:-d pipe:\(.*\)/pipe$|\1|p' "$LOG" | tail -1; }
# expect_stopped: the fake daemon got `quit`, has ended, and its directory is gone.
expect_stopped() {
  local pid dir
  pid=$(daemon_pid) dir=$(mps_dir)
  if grep -qx 'stdin:quit' "$LOG"; then ok "the daemon was told to quit"; else bad "no quit: $(tr '\n' ' ' <"$LOG")"; fi
  if [ -n "$pid" ] && ! alive "$pid"; then ok "the daemon ($pid) has ended"; else bad "daemon '$pid' still runs"; fi
  if [ -n "$dir" ] && [ ! -e "$dir" ]; then ok "$dir removed"; else bad "directory '$dir' left"; fi
}
fresh() { rm -f "$LOG"; }
show='echo "rank $RANK pipe=${CUDA_MPS_PIPE_DIRECTORY-unset} limit=${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT-unset}"'

# ---- the decision ----
fresh
run "4 ranks on one GPU: MPS started" 60 env "$WITH_FAKE" FAKE_MPS_LOG="$LOG" VGPU_SIM_GPUS=1x80G \
  "$VGPURUN" -np 4 -- sh -c "$show"
expect_rc 0
expect_out '^vgpurun: MPS: started for the job \(4 ranks share GPU 0\)$'
if [ "$(grep -c 'MPS: started' <<<"$out")" = 1 ]; then ok "said once"; else bad "said $(grep -c 'MPS: started' <<<"$out") times"; fi
dir=$(mps_dir)
if [ "$(grep -cE "^rank [0-3] pipe=$dir/pipe limit=0=20480MB\$" <<<"$out")" = 4 ]; then
  ok "every rank is a client of $dir/pipe with a limit of 20480 MiB (80 GiB / 4)"
else bad "the ranks' MPS variables (daemon dir '$dir')"; fi
expect_out "^vgpurun: MPS: the job's daemon stopped after the job \(exit 0\); $dir removed\$"
expect_stopped

fresh
run "--mem-per-rank sets the limit" 60 env "$WITH_FAKE" FAKE_MPS_LOG="$LOG" VGPU_SIM_GPUS=1x80G \
  "$VGPURUN" -np 2 --mem-per-rank 8G -- sh -c "$show"
expect_rc 0
if [ "$(grep -cE '^rank [01] pipe=/tmp/vgpu-mps\.[^ ]+/pipe limit=0=9728MB$' <<<"$out")" = 2 ]; then
  ok "8 GiB + 1.5 GiB a rank"; else bad "the limit with --mem-per-rank 8G"; fi
expect_stopped

# Not started: nothing of MPS reaches the ranks, and the line says why.
not_started() { # NAME WHY-REGEX ENV... -- VGPURUN-ARGS...
  local name=$1 why=$2
  shift 2
  fresh
  run "$name" 60 env "$@"
  if [ ! -s "$LOG" ] || ! grep -q '^args:-d' "$LOG"; then ok "no daemon started"; else bad "a daemon started"; fi
  expect_out "^vgpurun: MPS: not started: $why"
}
not_started "2 ranks on 2 GPUs" 'one rank a GPU$' "$WITH_FAKE" FAKE_MPS_LOG="$LOG" VGPU_SIM_GPUS=2x80G \
  "$VGPURUN" -v -np 2 -- sh -c "$show"
expect_rc 0
if [ "$(grep -c 'pipe=unset limit=unset' <<<"$out")" = 2 ]; then ok "no MPS for the ranks"; else bad "MPS variables reached the ranks"; fi
not_started "--no-mps" '--no-mps \(ranks take turns on the GPU\)$' "$WITH_FAKE" FAKE_MPS_LOG="$LOG" \
  VGPU_SIM_GPUS=1x80G "$VGPURUN" --no-mps -np 4 -- sh -c "$show"
expect_rc 0
if [ "$(grep -c 'pipe=unset limit=unset' <<<"$out")" = 4 ]; then ok "no MPS for the ranks"; else bad "MPS variables reached the ranks"; fi
# (A plain program on the one GPU in view is left alone; a vgpu program's
# runtime refuses the two ranks there, naming the ways out.)
not_started "an Exclusive_Process GPU" 'GPU 0 is in Exclusive_Process mode' "$WITH_FAKE" FAKE_MPS_LOG="$LOG" \
  VGPU_SIM_GPUS=1x80G/exclusive "$VGPURUN" -np 2 -- sh -c "$show"
expect_rc 0
not_started "a server already runs" "an MPS server already runs \\(CUDA_MPS_PIPE_DIRECTORY=$WORK/site\\)\$" \
  "$WITH_FAKE" FAKE_MPS_LOG="$LOG" VGPU_SIM_GPUS=1x80G CUDA_MPS_PIPE_DIRECTORY="$WORK/site" \
  "$VGPURUN" -np 2 -- sh -c "$show"
expect_rc 0
if [ "$(grep -c "pipe=$WORK/site limit=unset" <<<"$out")" = 2 ]; then ok "the ranks keep the user's server"; else bad "the user's CUDA_MPS_PIPE_DIRECTORY"; fi
if command -v nvidia-cuda-mps-control >/dev/null; then
  echo "--- 'not found' not checked: this host has nvidia-cuda-mps-control"
else
  not_started "no nvidia-cuda-mps-control" "the GPUs are simulated and this host has no nvidia-cuda-mps-control \\(on a GPU host vgpurun would start it\\)\$" \
    FAKE_MPS_LOG="$LOG" VGPU_SIM_GPUS=1x80G "$VGPURUN" -np 2 -- sh -c "$show"
  expect_rc 0
fi

# ---- however the job ends, no daemon is left ----
fresh
run "a rank fails" 60 env "$WITH_FAKE" FAKE_MPS_LOG="$LOG" VGPU_SIM_GPUS=1x80G \
  "$VGPURUN" -np 2 -- sh -c '[ "$RANK" = 1 ] && exit 3; exit 0'
expect_rc 3
expect_out "^vgpurun: MPS: the job's daemon stopped after the job \\(exit 3\\)"
expect_stopped

fresh
run "the daemon does not start" 60 env "$WITH_FAKE" FAKE_MPS_LOG="$LOG" FAKE_MPS_FAIL=1 \
  VGPU_SIM_GPUS=1x80G "$VGPURUN" -np 2 -- true
expect_rc 127
expect_out 'nvidia-cuda-mps-control -d failed: fake: cannot start \(the daemon.s log stays in /tmp/vgpu-mps\.[^ ]+/log\)'
rm -rf "$(mps_dir)"

# start_job NAME RANK-SCRIPT: vgpurun in the background ($vpid, output in
# $WORK/job.out), once both ranks have said "ready".
start_job() {
  fresh
  echo "--- $1"
  env "$WITH_FAKE" FAKE_MPS_LOG="$LOG" VGPU_SIM_GPUS=1x80G "$VGPURUN" -np 2 -- sh -c "$2" \
    >"$WORK/job.out" 2>&1 &
  vpid=$!
  for _ in $(seq 300); do
    [ "$(grep -c '^ready$' "$WORK/job.out")" = 2 ] && return 0
    sleep 0.1
  done
  out=$(cat "$WORK/job.out")
  bad "the job did not start within 30 s"
}
start_job "SIGTERM to vgpurun" 'trap "kill \$!; exit 75" USR1; echo ready; sleep 60 & wait'
kill -TERM "$vpid"
wait "$vpid"
rc=$?
out=$(cat "$WORK/job.out")
expect_rc 75
expect_out "^vgpurun: MPS: the job's daemon stopped after the job \\(exit 75\\)"
expect_stopped

start_job "kill -9 of vgpurun" 'echo ready; exec sleep 60'
kill -KILL "$vpid"
t0=$(date +%s.%N)
for _ in $(seq 30); do
  [ -n "$(daemon_pid)" ] && ! alive "$(daemon_pid)" && [ ! -e "$(mps_dir)" ] && break
  sleep 0.1
done
secs=$(echo "$(date +%s.%N) - $t0" | bc)
wait "$vpid" 2>/dev/null
out=$(cat "$WORK/job.out")
expect_within 3
expect_stopped
expect_out "^vgpurun: MPS: vgpurun ended without stopping the job's daemon \\(killed\\?\\): its watcher \\(pid [0-9]+\\) stopped it and removed /tmp/vgpu-mps\\."
# A failed check may have left a fake daemon or its directory: not for long.
while read -r pid pipe; do
  alive "$pid" && kill "$pid"
  rm -rf "${pipe%/pipe}"
done <"$LOG.all"
finish
