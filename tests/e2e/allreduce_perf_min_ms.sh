#!/usr/bin/env bash
# allreduce_perf_min_ms.sh: vgpu_allreduce_perf's --min_ms, which
# scripts/bench_allreduce.sh relies on for its small sizes: a size's timed
# calls last at least that long (so that a few microseconds' call is not
# read inside one time slice), every rank makes the same calls, and bad
# values are refused. The tool's own count ("# rank 0: N collectives, X s
# inside them") is what is checked. Then --fresh: the input rewritten
# before every call, and not timed.
source "$(dirname "$0")/lib.sh"
PERF=$VGPU_BUILD_DIR/vgpu_allreduce_perf

# calls_and_time: "N X" from the tool's closing line.
calls_and_time() { sed -n 's/^# rank 0: \([0-9]*\) collectives, \([0-9.]*\) s inside them$/\1 \2/p' <<<"$out"; }

# Without --min_ms: the warm-up, the timed calls and the check, out of place
# and in place: 2 x (5 + 20 + 1).
run "8 bytes, -n 20" 60 "$MPIRUN" -np 2 "$PERF" -b 8 -e 8 -n 20 -w 5
expect_rc 0
read -r calls _ <<<"$(calls_and_time)"
if [ "${calls:-0}" = 52 ]; then ok "52 collectives"; else bad "collectives: '${calls:-}', expected 52"; fi

# --min_ms 100: the last timed round of each of the two (out of place, in
# place) lasts >= 100 ms, so the calls inside collectives add up to >= 0.2 s:
# far more than 52 calls of a few microseconds. A round aims at 1.1 x 100 ms
# from the round before's time a call, which a busy machine can make 3x too
# short (0.24 s idle, 0.30-0.38 s beside 3 busy loops on 2 cores): below 1.5 s
# still tells a runaway count.
run "8 bytes, --min_ms 100" 60 "$MPIRUN" -np 2 "$PERF" -b 8 -e 8 -n 20 -w 5 --min_ms 100
expect_rc 0
expect_out "iters 20 \(or more: at least --min_ms of calls\)"
read -r calls secs <<<"$(calls_and_time)"
if awk -v s="${secs:-0}" 'BEGIN { exit !(s >= 0.2 && s < 1.5) }'; then
  ok "$secs s inside $calls collectives (>= 0.2 s: two rounds of 100 ms)"
else bad "$secs s inside ${calls:-?} collectives: expected 0.2 to 1.5 s"; fi
if [ "${calls:-0}" -gt 200 ]; then ok "$calls collectives, more than -n's"
else bad "${calls:-?} collectives: --min_ms added no calls"; fi
expect_out "^ +8 +2 +float32 +sum .* 0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 "

# Bounds: 0 to 60000 ms; 0 is -n alone.
for v in -1 60001 x 5ms ""; do
  run "--min_ms '$v' refused" 30 "$MPIRUN" -np 1 "$PERF" -b 8 -e 8 --min_ms "$v"
  expect_nonzero
  expect_out "min_ms 0 to 60000"
done
run "--min_ms 0" 60 "$MPIRUN" -np 2 "$PERF" -b 8 -e 8 -n 20 -w 5 --min_ms 0
expect_rc 0
read -r calls _ <<<"$(calls_and_time)"
if [ "${calls:-0}" = 52 ]; then ok "--min_ms 0: 52 collectives, as -n alone"; else bad "--min_ms 0: '${calls:-}' collectives, expected 52"; fi

# --fresh at 16 MiB, where rewriting the input (a 16 MiB copy a rank) takes
# about as long as a call: the same calls, right results in both columns,
# and a table time that is the calls' alone. 100 more timed calls of each
# column (-n 110 against -n 10) add to the tool's own time inside
# collectives what the table says 100 calls take (many, so that the first
# call's page faults, ~0.13 s and not the same in both runs, are small
# beside them: 1.00-1.07x here); timing the rewrite as well made it
# 1.71-2.22x, and a time not measured at all would read far below.
run "16 MiB --fresh -n 10" 60 "$MPIRUN" -np 2 "$PERF" -b 16M -e 16M -n 10 -w 3 --fresh
expect_rc 0
expect_out "check 1, fresh input every call"
expect_out "^ +16777216 +4194304 +float32 +sum .* 0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 "
read -r calls secs10 <<<"$(calls_and_time)"
if [ "${calls:-0}" = 28 ]; then ok "--fresh: 28 collectives"; else bad "--fresh: '${calls:-}' collectives, expected 28"; fi
run "16 MiB --fresh -n 110" 60 "$MPIRUN" -np 2 "$PERF" -b 16M -e 16M -n 110 -w 3 --fresh
expect_rc 0
read -r _ secs110 <<<"$(calls_and_time)"
read -r oop ip <<<"$(awk '$1 == 16777216 { print $5, $9 }' <<<"$out")"
if awk -v o="${oop:-1e9}" -v i="${ip:-1e9}" -v a="${secs10:-0}" -v b="${secs110:-0}" \
     'BEGIN { t = 100 * (o + i); d = (b - a) * 1e6; exit !(d > 0 && t <= 1.4 * d && t >= 0.6 * d) }'; then
  ok "--fresh: 100 x ($oop + $ip) us within 0.6-1.4 x the $secs110 - $secs10 s they added inside collectives"
else bad "--fresh: 100 x (${oop:-?} + ${ip:-?}) us against ${secs110:-?} - ${secs10:-?} s inside collectives: the rewrite is timed"; fi
finish
