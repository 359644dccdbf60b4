#!/usr/bin/env bash
# comm_kill.sh: kill -9 one rank of a running ring benchmark; the job must end
# (not hang) and leave no shared-memory name of the job in /dev/shm, since
# every name is unlinked as soon as all ranks have attached. (Long options:
# scripts/mpirun.sh reads -n/-c anywhere on the line as the rank count.)
set -uo pipefail
build=${VGPU_BUILD_DIR:?}
src=${VGPU_SOURCE_DIR:?}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
fail() { cat "$out"; echo "comm_kill: FAILED: $*"; exit 1; }

"$src/scripts/mpirun.sh" -np 4 "$build/vgpu_allreduce_perf" --backend ring -b 16M -e 16M \
  --iters 100000 --warmup_iters 0 --check 0 -t 20 >"$out" 2>&1 &
job=$!
for _ in $(seq 1 300); do # up to 30 s for start-up
  grep -q "^# job id" "$out" && break
  sleep 0.1
done
id=$(sed -n 's/^# job id \([0-9a-f]*\)$/\1/p' "$out")
[ -n "$id" ] || { pkill -9 -P "$job"; kill -9 "$job"; fail "the benchmark did not start"; }
sleep 1
# mpirun.sh runs mpirun as its child; the ranks are mpirun's children: kill
# one of them (not the first).
launcher=$(pgrep -P "$job" -x mpirun)
victim=$(pgrep -P "${launcher:-0}" | sed -n 2p)
[ -n "$victim" ] || { kill -9 "$job" $launcher; fail "no rank process found under mpirun ($launcher)"; }
leaked_before=$(ls /dev/shm | grep -c "$id")
kill -9 "$victim"
for _ in $(seq 1 600); do # up to 60 s for the job to end
  kill -0 "$job" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$job" 2>/dev/null; then
  kill -9 "$job" "$launcher"
  fail "the job did not end after a rank was killed"
fi
wait "$job"
rc=$?
[ $rc -ne 0 ] || fail "the job reported success after a rank was killed"
[ "$leaked_before" -eq 0 ] || fail "names of the job existed while it ran: $(ls /dev/shm | grep "$id")"
leaked=$(ls /dev/shm | grep "$id" || true)
[ -z "$leaked" ] || fail "left in /dev/shm: $leaked"
echo "comm_kill: OK (job $id ended with status $rc, nothing left in /dev/shm)"
