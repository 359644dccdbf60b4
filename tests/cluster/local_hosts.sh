#!/usr/bin/env bash
# local_hosts.sh: three "hosts" made by scripts/cluster/hosts.sh (network
# namespaces on a private bridge, each with its own hostname), as a user makes
# them. vgpurun --hostfile runs 2 ranks per host from this machine; the
# deterministic training across hosts equals the one-host run bit for bit; a
# throttled link (tc) lowers the ring's bus bandwidth to what the link allows;
# down leaves no namespace, link, file or process behind. Without root the
# script says so.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
HOSTS_SH=$VGPU_SOURCE_DIR/scripts/cluster/hosts.sh

if [ "$(id -u)" != 0 ] && ! command -v setpriv >/dev/null; then
  skip "needs root (network namespaces)"
fi
# Without root: said, nothing made (checked as nobody when we are root).
nobody=()
[ "$(id -u)" = 0 ] && nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
run "hosts.sh up without root" 20 "${nobody[@]}" "$HOSTS_SH" up 2 --name nr$$
expect_rc 1
expect_out '^hosts.sh: needs root \(network namespaces, veth links, tc\): run it with sudo$'
need_netns_hosts

NAME=t$(($$ % 10000000))
at_exit "$HOSTS_SH down --name $NAME"
run "hosts.sh up 3" 30 "$HOSTS_SH" up 3 --name "$NAME"
[ "$rc" = 0 ] || skip "cannot make the hosts (in a container without CAP_SYS_ADMIN?): $out"
expect_out "^hosts.sh: 3 hosts up \($NAME-h0..$NAME-h2, "
eval "$("$HOSTS_SH" env --name "$NAME")"
NET=${OMPI_MCA_btl_tcp_if_include%.0/24}
CONFIG="$CONFIGS/synthetic_small.ini"
VGPURUN=("$VGPU_BUILD_DIR/vgpurun" --hostfile "$VGPU_HOSTFILE")

bridge_bytes() { # what crossed the bridge: rx + tx of host 0's end
  cat "/sys/class/net/$NAME-p0/statistics/rx_bytes" "/sys/class/net/$NAME-p0/statistics/tx_bytes" |
    paste -sd+ | bc
}

# ---- 1. placement: 2 ranks per host, the variables reach every host ----
run "vgpurun --hostfile: where the ranks run" 60 "${VGPURUN[@]}" -np 6 --backend ring \
  -- sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname) backend=$VGPU_BACKEND"'
expect_rc 0
for r in 0 1 2 3 4 5; do expect_out "^rank $r on $NAME-h$((r / 2)) backend=ring\$"; done

# ---- the hosts share this machine's cores (one kernel boot id): a rank's
# BLAS threads are the cores over the job's 3 ranks (2 on h0, 1 on h1), not
# over its host's (which gave h1's rank every core: "BLAS: 1-2 threads")
want=$(($(nproc) / 3)); [ "$want" -ge 1 ] || want=1
run "3 ranks on 2 hosts of one machine: BLAS threads" 60 env VGPU_PLAN=1 "${VGPURUN[@]}" -np 3 -- \
  "$TRAIN" "$CONFIG"
expect_rc 0
expect_out "\\(3 ranks, 2 hosts; BLAS: $want threads?\\)"

# ---- 2. the same training across three hosts and on one ----
bytes0=$(bridge_bytes)
run "6 ranks on 3 hosts" 90 "${VGPURUN[@]}" -np 6 --verbose -- "$TRAIN" "$CONFIG" \
  --set train.deterministic=true --trace "$WORK/hosts.json"
crossed=$(($(bridge_bytes) - bytes0))
expect_rc 0
expect_out '^vgpurun: ([A-Z_]+=[^ ]+ )*mpirun -np 6 --hostfile .* [^ ]*/vgpurun-rank [^ ]*/vgpu_train '
expect_out 'vgpu: no GPU: 6 CPU-simulated virtual GPUs \(6 ranks, 3 hosts; BLAS: 1 thread\)'
for r in 0 1 2 3 4 5; do expect_out "^ +$r +$NAME-h$((r / 2)) +$((r % 2)) +cpu0 "; done
expect_out '^vgpu_train: done ranks=6 devices=3xcpu/6vgpu .*status=ok$'
crc3=$(summary_field params_crc) steps=$(summary_field steps)
# Each step's reduction crosses the hosts' links (far more than launch traffic).
if [ "${crossed:-0}" -gt $((1 << 20)) ]; then ok "$crossed bytes crossed host 0's link ($steps steps)"
else bad "only ${crossed:-?} bytes crossed host 0's link: the ring did not go between hosts"; fi

# The timeline across hosts: the clocks of hosts 1 and 2 are measured over
# the network; the namespaces share one kernel's clock, so the measured
# offsets must be zero within their uncertainty, and each collective must
# overlap on all 6 ranks.
expect_out "^vgpu: timeline $WORK/hosts.json: [0-9]+ spans from 6 ranks, clocks aligned within [0-9]+ us\$"
check=$(python3 "$VGPU_SOURCE_DIR/tests/e2e/trace_check.py" "$WORK/hosts.json" 6 "${steps:-0}" --same-clock)
if [ $? = 0 ]; then ok "the trace across 3 hosts: $(grep -c '^ok' <<<"$check") checks"
else out=$check; bad "the trace across 3 hosts"; fi
uncertain=$(python3 -c 'import json,sys; print(sum(c["uncertainty_us"] > 0 for c in json.load(open(sys.argv[1]))["otherData"]["clocks"]))' "$WORK/hosts.json" 2>/dev/null)
if [ "${uncertain:-0}" = 4 ]; then ok "the 4 ranks on hosts 1 and 2 have measured clocks"
else bad "${uncertain:-no} ranks with a measured clock, expected 4"; fi

run "6 ranks on 1 host (reference)" 90 "$MPIRUN" -np 6 "$TRAIN" "$CONFIG" --quiet \
  --set train.deterministic=true
expect_rc 0
crc1=$(summary_field params_crc)
if [ -n "$crc1" ] && [ "$crc1" = "$crc3" ]; then ok "params_crc $crc3 on 3 hosts and on 1"
else bad "params_crc differ: $crc3 (3 hosts) vs $crc1 (1 host)"; fi

# ---- 3. a throttled link: one rank per host, the ring's bus bandwidth ----
ring_busbw() { # sets $busbw: GB/s of a 4 MiB ring all-reduce, from its time column
  run "ring all-reduce across 3 hosts, link $1" 90 "$VGPU_BUILD_DIR/vgpurun" -np 3 \
    -H "$NET.1:1,$NET.2:1,$NET.3:1" -- "$VGPU_BUILD_DIR/vgpu_allreduce_perf" --backend ring \
    --minbytes 4M --maxbytes 4M --iters 5 --warmup_iters 1 --check 1
  expect_rc 0
  busbw=$(awk '!/^#/ && NF >= 13 { v = $1 / ($6 * 1e-6) * 4 / 3 / 1e9 } END { printf "%.4f", v }' <<<"$out")
}
ring_busbw none
free=$busbw
run "hosts.sh link 50mbit" 20 "$HOSTS_SH" link 50mbit --name "$NAME"
expect_rc 0
expect_out "^hosts.sh: link model of '$NAME' is now 50mbit$"
ring_busbw 50mbit
slow=$busbw
echo "--- busbw: unthrottled $free GB/s, 50mbit link $slow GB/s (the link's limit 0.00625 GB/s)"
if [ "$(echo "$slow > 0 && $slow < $free / 2" | bc -l)" = 1 ]; then ok "50mbit lowers busbw ($free -> $slow GB/s)"
else bad "50mbit did not lower busbw: $free -> $slow GB/s"; fi
if [ "$(echo "$slow <= 0.00625 * 1.15" | bc -l)" = 1 ]; then ok "busbw $slow GB/s within the link's 0.00625 GB/s"
else bad "busbw $slow GB/s above the 50mbit link's 0.00625 GB/s"; fi

# Latency needs sch_netem; without it, said and refused.
run "hosts.sh link with latency" 20 "$HOSTS_SH" link 1gbit,50us --name "$NAME"
if [ "$rc" = 0 ]; then
  expect_out "is now 1gbit,50us"
  if ip netns exec "$NAME-h0" tc qdisc show dev eth0 | grep -q 'netem.*delay 50us'; then ok "netem delay 50us on host 0"
  else bad "no netem qdisc on host 0: $(ip netns exec "$NAME-h0" tc qdisc show dev eth0)"; fi
else
  expect_rc 1
  expect_out 'this kernel has no netem \(CONFIG_NET_SCH_NETEM\), so latency cannot be modelled'
fi
run "hosts.sh bad link" 20 "$HOSTS_SH" link fast --name "$NAME"
expect_rc 2
expect_out "link rate 'fast': a number with kbit, mbit, gbit or tbit"

# ---- 4. down leaves nothing ----
run "hosts.sh down" 30 "$HOSTS_SH" down --name "$NAME"
expect_rc 0
left=$(ip netns list | grep -E "^$NAME-h[0-9]" || true)
if [ -z "$left" ]; then ok "no namespace left"; else bad "namespaces left: $left"; fi
if ! ip link show "$NAME-br" >/dev/null 2>&1 && ! ip -o link | grep -q " $NAME-p[0-9]"; then ok "no link left"
else bad "links left: $(ip -o link | grep -E " $NAME-(br|p[0-9])")"; fi
if [ ! -e "/run/vgpu-cluster/hosts-$NAME" ]; then ok "no state left"; else bad "/run/vgpu-cluster/hosts-$NAME left"; fi
if ! grep -qs "/run/vgpu-cluster/hosts-$NAME" /proc/mounts; then ok "no mount left"; else bad "mounts left"; fi
run "hosts.sh status" 10 "$HOSTS_SH" status --name "$NAME"
expect_out "hosts '$NAME' are not up"
expect_no_shm
finish
