#!/usr/bin/env bash
# comm_kill.sh: kill -9 one rank of a running ring benchmark; the job must end
# (not hang) and leave no shared-memory name of the job in /dev/shm, since
# every name is unlinked as soon as all ranks have attached. (Long options:
# scripts/mpirun.sh reads -n/-c anywhere on the line as the rank count.)
source "$(dirname "$0")/lib.sh"
log="$WORK/bench.out"

"$MPIRUN" -np 4 "$VGPU_BUILD_DIR/vgpu_allreduce_perf" --backend ring -b 16M -e 16M \
  --iters 100000 --warmup_iters 0 --check 0 -t 20 >"$log" 2>&1 &
job=$!
for _ in $(seq 1 300); do # up to 30 s for start-up
  grep -q "^# job id" "$log" && break
  sleep 0.1
done
id=$(sed -n 's/^# job id \([0-9a-f]*\)$/\1/p' "$log")
# mpirun.sh runs mpirun as its child; the ranks are mpirun's children: kill
# one of them (not the first).
launcher=$(pgrep -P "$job" -x mpirun)
victim=$(pgrep -P "${launcher:-0}" | sed -n 2p)
if [ -z "$id" ] || [ -z "$victim" ]; then
  out=$(cat "$log")
  bad "the benchmark did not start (job id '${id}', rank '${victim}')"
  kill -9 "$job" $launcher 2>/dev/null
  finish
  exit
fi
sleep 1
leaked_before=$(ls /dev/shm | grep "$id" || true)
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
fi
if [ -z "$leaked_before" ]; then ok "no name of the job in /dev/shm while it ran"; else bad "names of the job existed while it ran: $leaked_before"; fi
leaked=$(ls /dev/shm | grep "$id" || true)
if [ -z "$leaked" ]; then ok "nothing of job $id left in /dev/shm"; else bad "left in /dev/shm: $leaked"; fi
finish
