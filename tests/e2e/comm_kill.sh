#!/usr/bin/env bash
# comm_kill.sh: kill -9 one rank of a running ring benchmark; the job must end
# (not hang) and leave nothing behind: its shared memory has no name (memfds,
# launcher/shm/shm_share.h), so it goes with the last process that maps it.
# (Long options: scripts/mpirun.sh reads -n/-c anywhere on the line as the
# rank count.) With the argument `devcoll` the benchmark runs on the device
# collectives (VGPU_DEVCOLL=1: the protocol a GPU's kernel runs, simulated):
# the survivors' waits must then end through the watchdog, naming the rank,
# within 10 s.
source "$(dirname "$0")/lib.sh"
log="$WORK/bench.out"
devcoll=${1:-}
[ "$devcoll" = devcoll ] && export VGPU_DEVCOLL=1

"$MPIRUN" -np 4 "$VGPU_BUILD_DIR/vgpu_allreduce_perf" --backend ring -b 16M -e 16M \
  --iters 100000 --warmup_iters 0 --check 0 -t 20 >"$log" 2>&1 &
job=$!
for _ in $(seq 1 300); do # up to 30 s for start-up
  grep -q "^# *(B)" "$log" && break
  sleep 0.1
done
# mpirun.sh runs mpirun as its child; the ranks are mpirun's children: kill
# one of them (not the first).
launcher=$(pgrep -P "$job" -x mpirun)
ranks=$(pgrep -P "${launcher:-0}")
victim=$(sed -n 2p <<<"$ranks")
if ! grep -q "^# *(B)" "$log" || [ -z "$victim" ]; then
  out=$(cat "$log")
  bad "the benchmark did not start (rank '${victim}')"
  kill -9 "$job" $launcher 2>/dev/null
  finish
  exit
fi
sleep 1
victim_rank=$(tr '\0' '\n' <"/proc/$victim/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
shm_before=$(ls /dev/shm)
named=$(cat $(printf '/proc/%s/maps ' $ranks) 2>/dev/null | grep -c '/dev/shm/vgpu')
memfds=$(cat $(printf '/proc/%s/maps ' $ranks) 2>/dev/null | grep -c '/memfd:vgpu-arena')
t0=$(date +%s.%N)
kill -9 "$victim"
for _ in $(seq 1 600); do # up to 60 s for the job to end
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
secs=$(echo "$(date +%s.%N) - $t0" | bc)
out=$(cat "$log")
if kill -0 "$job" 2>/dev/null; then
  kill -9 "$job" "$launcher"
  bad "the job did not end within 60 s after a rank was killed"
else
  wait "$job"
  rc=$?
  expect_nonzero
  ok "the job ended ${secs}s after rank kill"
  if [ "$devcoll" = devcoll ]; then
    expect_out "device collective [0-9]+: rank ${victim_rank:-?} has exited"
    expect_within 10
  fi
fi
if [ "$named" = 0 ] && [ "$memfds" -ge 8 ]; then
  ok "the ranks' shared memory is memfds ($memfds arena mappings), none named in /dev/shm"
else
  bad "the ranks map $named /dev/shm/vgpu* segments and $memfds arena memfds (expected 0 and >= 8)"
fi
for _ in $(seq 1 50); do # ranks that outlive mpirun get 5 s to go
  left=""
  for pid in $ranks; do
    [ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && left="$left $pid"
  done
  [ -z "$left" ] && break
  sleep 0.1
done
if [ -z "$left" ]; then ok "no rank left (their memory went with them)"; else bad "ranks left:$left"; fi
new=$(ls /dev/shm | grep -vxF -f <(echo "$shm_before") | grep '^vgpu-' || true)
if [ -z "$new" ]; then ok "nothing of the job in /dev/shm"; else bad "new in /dev/shm: $new"; fi
finish
