#!/usr/bin/env bash
# projection_validate.sh: issue 35's proof here, one counted case end to end
# (scripts/project_validate.sh, docs/PROJECTION.md#validation): a one-host
# run of the default job projected onto 2 namespace hosts behind a 200 Mbit
# link, then measured there. The link carries most of the step (~95%), so
# a projection with its communication term dropped or doubled is off by
# ~95%: the test fails beyond 40%. The goal of 10% is the table's (run on an
# idle machine); 40% leaves room for a CI machine's other jobs (this case
# read -27% once under load) and still tells either fault.
# Needs root and network namespaces, else skipped (77) with the reason.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../cluster/lib.sh"
VALIDATE=$VGPU_SOURCE_DIR/scripts/project_validate.sh

need_working_netns_hosts

run "project_validate.sh: 200mbit, 2 hosts" 240 env VGPU_BUILD_DIR="$VGPU_BUILD_DIR" "$VALIDATE" \
  --links 200mbit --hosts 2 --latency none --keep "$WORK/v"
expect_rc 0
echo "$out" | grep '^|'
# | link | hosts | ranks | steps | compute | comm | projected | measured | error | ...
row=$(grep -E '^\| 200mbit \| 2 \| 2 \|' <<<"$out")
read -r compute comm projected measured <<<"$(awk -F'|' '{ print $6, $7, $8, $9 }' <<<"$row")"
if [ -n "$measured" ]; then ok "a row: projected $projected ms, measured $measured ms a step"
else bad "no row for 200mbit, 2 hosts"; fi
if grep -qE '\| yes \|' <<<"$row"; then ok "the case counts (2 ranks on $(nproc) cores)"
else bad "the case does not count: $row"; fi

# within PCT PROJECTED: |PROJECTED - measured| / measured <= PCT%.
within() { awk -v p="$2" -v m="$measured" -v l="$1" 'BEGIN { e = (p - m) / m * 100; if (e < 0) e = -e; exit !(m > 0 && e <= l) }'; }
err() { awk -v p="$1" -v m="$measured" 'BEGIN { printf "%+.1f%%", (p - m) / m * 100 }'; }
if within 40 "$projected"; then ok "projection error $(err "$projected") (bound 40%; the table's goal 10%)"
else bad "projection error $(err "$projected"), over 40%"; fi
# The model's communication term, dropped or doubled, must show.
none=$(awk -v c="$compute" 'BEGIN { print c }')
double=$(awk -v c="$compute" -v m="$comm" 'BEGIN { print c + 2 * m }')
if ! within 40 "$none"; then ok "without communication ($none ms) the projection would be off by $(err "$none")"
else bad "compute alone ($none ms) is within 40%: the case cannot tell a missing communication term"; fi
if ! within 40 "$double"; then ok "with communication doubled ($double ms) it would be off by $(err "$double")"
else bad "communication doubled ($double ms) is within 40%: the case cannot tell"; fi

# Nothing left behind: the script's hosts are down.
left=$(ip netns list 2>/dev/null | grep -c '^pv[0-9]*-h' || true)
if [ "$left" = 0 ]; then ok "no namespace host left"; else bad "$left namespace hosts left"; fi
finish
