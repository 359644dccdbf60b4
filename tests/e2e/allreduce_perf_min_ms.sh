#!/usr/bin/env bash
# allreduce_perf_min_ms.sh: vgpu_allreduce_perf's --min_ms, which
# scripts/bench_allreduce.sh relies on for its small sizes: a size's timed
# calls last at least that long (so that a few microseconds' call is not
# read inside one time slice), every rank makes the same calls, and bad
# values are refused. The tool's own count ("# rank 0: N collectives, X s
# inside them") and its report of each column's timed round are what is
# checked. Then --fresh: the input rewritten
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

# --min_ms 100: each column's times come from a round of calls that lasted
# at least 100 ms by the tool's own clock (the slowest rank's), and that
# round was sized from the round before's time a call: ceil(1.1 x 100 ms /
# that time) calls. The "# timed" lines report both, so the count is
# checked exactly (a runaway or a short count fails whatever the load),
# and the round's length from below (a machine whose load rises between
# rounds makes it longer: 0.15-0.4 s seen beside other jobs; below 5 s).
# The time inside the collectives is no measure of it: the calls are a share
# of the round (0.178 s inside a 0.2 s round failed this test when it read
# that). Every timed call is a collective: the total holds the warm-up, the
# check, the first round of 20 and the final round of each column.
run "8 bytes, --min_ms 100" 60 "$MPIRUN" -np 2 "$PERF" -b 8 -e 8 -n 20 -w 5 --min_ms 100
expect_rc 0
expect_out "iters 20 \(or more: at least --min_ms of calls\)"
read -r calls _ <<<"$(calls_and_time)"
total_final=0
for col in out-of-place in-place; do
  read -r n ms us <<<"$(sed -n "s/^# timed 8 B $col: \([0-9]*\) calls in \([0-9.]*\) ms, sized from \([0-9.e+-]*\) us a call$/\1 \2 \3/p" <<<"$out")"
  if awk -v n="${n:-0}" -v ms="${ms:-0}" -v us="${us:-0}" \
       'BEGIN { want = 1.1 * 100e3 / us; if (want != int(want)) want = int(want) + 1
                exit !(us > 0 && n >= want - 1 && n <= want + 1 && ms >= 100 && ms < 5000) }'; then
    ok "$col: $n calls (1.1 x 100 ms / $us us) in $ms ms (>= 100)"
  else bad "$col: '${n:-}' calls in '${ms:-}' ms sized from '${us:-}' us: want ceil(1.1 x 100 ms / that) calls, 100 ms to 5 s"; fi
  total_final=$((total_final + ${n:-0}))
done
if [ "${calls:-0}" -ge $((52 + total_final)) ]; then
  ok "$calls collectives: at least 2 x (5 + 20 + 1) + the final rounds' $total_final"
else bad "${calls:-?} collectives: fewer than 2 x (5 + 20 + 1) + the final rounds' $total_final"; fi
expect_out "^ +8 +2 +float32 +sum +-1 .* 0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 "

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
# and a table time that is the calls' alone, checked against the tool's own
# time inside the collectives in the same run (a load that differs between
# two runs does not enter): the 220 timed calls take 0.93-0.98 of it here
# (the rest is the warm-up, the check and the first call's page faults);
# timing the rewrite as well makes the table 1.7-2.2x the calls' time, and a
# time not measured at all would read far below.
run "16 MiB --fresh -n 110" 60 "$MPIRUN" -np 2 "$PERF" -b 16M -e 16M -n 110 -w 3 --fresh
expect_rc 0
expect_out "check 1, fresh input every call"
expect_out "^ +16777216 +4194304 +float32 +sum +-1 .* 0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0 "
read -r calls secs <<<"$(calls_and_time)"
if [ "${calls:-0}" = 228 ]; then ok "--fresh: 228 collectives (2 x (3 + 110 + 1))"
else bad "--fresh: '${calls:-}' collectives, expected 228"; fi
read -r oop ip <<<"$(awk '$1 == 16777216 { print $6, $10 }' <<<"$out")"
if awk -v o="${oop:-1e9}" -v i="${ip:-1e9}" -v s="${secs:-0}" \
     'BEGIN { t = 110 * (o + i); d = s * 1e6; exit !(d > 0 && t <= 1.15 * d && t >= 0.6 * d) }'; then
  ok "--fresh: 110 x ($oop + $ip) us within 0.6-1.15 x the $secs s inside collectives"
else bad "--fresh: 110 x (${oop:-?} + ${ip:-?}) us against ${secs:-?} s inside collectives: the rewrite is timed, or the calls are not"; fi
finish
