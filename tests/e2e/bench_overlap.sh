#!/usr/bin/env bash
# bench_overlap.sh: scripts/bench_overlap.sh as docs/TRAINING.md runs it,
# shortened (6 steps, one round, 1 Gbit): a row for each setting, OK, and the
# buckets' exposed communication below the single all-reduce's (25 ms
# against 7 a step on an idle 2-core machine: a 3x gap); its usage errors.
# Needs root and network namespaces, else skipped (77) with the reason.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../cluster/lib.sh"
BENCH=$VGPU_SOURCE_DIR/scripts/bench_overlap.sh

run "--hosts 5 refused" 10 "$BENCH" --hosts 5
expect_rc 2
expect_out 'hosts 5: 2 to 4'
run "--steps 0 refused" 10 "$BENCH" --steps 0
expect_rc 2

need_working_netns_hosts

run "bench_overlap.sh: 1gbit, 2 hosts, buckets 0 and 1" 240 env VGPU_BUILD_DIR="$VGPU_BUILD_DIR" \
  "$BENCH" --links 1gbit --buckets "0 1" --steps 6 --repeat 1
expect_rc 0
echo "$out" | grep -E '^(link|1gbit)'
expect_out '^OK$'
one=$(awk '$1 == "1gbit" && $2 == "0" { print $4 }' <<<"$out")
bucketed=$(awk '$1 == "1gbit" && $2 == "1" { print $4 }' <<<"$out")
if [ -n "$one" ] && [ -n "$bucketed" ] && awk -v a="$bucketed" -v b="$one" 'BEGIN { exit !(a < b) }'; then
  ok "exposed communication: $bucketed ms a step with buckets, $one with one all-reduce"
else
  bad "exposed communication: '$bucketed' with buckets, '$one' without"
fi
finish
