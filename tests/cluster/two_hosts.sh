#!/usr/bin/env bash
# two_hosts.sh: two "hosts" on this machine: network namespaces joined by a
# veth pair in a private /24 that exists only inside them, each with its own
# hostname. vgpurun --hostfile runs the same vgpu_train job with 2 ranks per
# host (remote launch enters the namespace instead of ssh); the ring crosses
# hosts over MPI/TCP. The result must equal the single-host run's.
source "$(dirname "$0")/../e2e/lib.sh"
source "$(dirname "$0")/lib.sh"
need_root "to create network namespaces and a veth pair"
need_cmds iproute2 ip
need_cmds util-linux unshare nsenter

NS_A=vgpu-a$$ NS_B=vgpu-b$$
VETH_A=vga$$ VETH_B=vgb$$ # at most 15 characters
NET=10.213.7
HOST_A=vgpuhosta$$ HOST_B=vgpuhostb$$
CONFIG="$CONFIGS/synthetic_small.ini"

# ---- the two hosts ----
ip netns add "$NS_A" || skip "cannot create a network namespace (in a container without CAP_SYS_ADMIN?)"
at_exit "ip netns del $NS_A"
ip netns add "$NS_B"
at_exit "ip netns del $NS_B"
# Anything still running inside (a stray orted, a rank) goes first.
at_exit "kill -9 \$(ip netns pids $NS_A) \$(ip netns pids $NS_B)"
ip link add "$VETH_A" type veth peer name "$VETH_B"
at_exit "ip link del $VETH_A" # gone with the namespaces normally; not if moving failed
ip link set "$VETH_A" netns "$NS_A"
ip link set "$VETH_B" netns "$NS_B"
ip -n "$NS_A" addr add "$NET.1/24" dev "$VETH_A"
ip -n "$NS_B" addr add "$NET.2/24" dev "$VETH_B"
for ns in "$NS_A" "$NS_B"; do ip -n "$ns" link set lo up; done
ip -n "$NS_A" link set "$VETH_A" up
ip -n "$NS_B" link set "$VETH_B" up

# One long-lived process per host holds its own UTS namespace (hostname);
# everything "on" that host enters its network + UTS namespaces. A shared
# hostname would make Open MPI's shared-memory transport collide.
ip netns exec "$NS_A" unshare --uts sh -c "hostname $HOST_A; exec sleep 600" &
PID_A=$!
at_exit "kill $PID_A; wait $PID_A"
ip netns exec "$NS_B" unshare --uts sh -c "hostname $HOST_B; exec sleep 600" &
PID_B=$!
at_exit "kill $PID_B; wait $PID_B"
for _ in $(seq 50); do
  [ "$(nsenter -t $PID_A --uts hostname 2>/dev/null)" = "$HOST_A" ] &&
    [ "$(nsenter -t $PID_B --uts hostname 2>/dev/null)" = "$HOST_B" ] && break
  sleep 0.1
done
ON_A=(nsenter -t "$PID_A" --net --uts) # run "on host A"

# Open MPI's remote-launch agent: `agent HOST COMMAND...` as ssh would be.
cat >"$WORK/agent" <<EOF
#!/bin/sh
host=\$1; shift
case \$host in
  $NET.1) pid=$PID_A ;;
  $NET.2) pid=$PID_B ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
exec nsenter -t \$pid --net --uts sh -c "\$*"
EOF
chmod +x "$WORK/agent"
printf '%s slots=2\n%s slots=2\n' "$NET.1" "$NET.2" >"$WORK/hosts"
export OMPI_MCA_plm_rsh_agent="$WORK/agent"
export OMPI_MCA_btl_tcp_if_include="$NET.0/24"
export OMPI_MCA_oob_tcp_if_include="$NET.0/24"
VGPURUN=("$VGPU_BUILD_DIR/vgpurun" --hostfile "$WORK/hosts" -np 4)

veth_bytes() { # rx + tx of host A's end
  ip netns exec "$NS_A" cat "/sys/class/net/$VETH_A/statistics/rx_bytes" "/sys/class/net/$VETH_A/statistics/tx_bytes" |
    paste -sd+ | bc
}

# ---- 1. placement: 2 ranks per host, variables reach the remote host ----
run "vgpurun --hostfile: where the ranks run" 60 "${ON_A[@]}" "${VGPURUN[@]}" --backend ring \
  -- sh -c 'echo "rank $OMPI_COMM_WORLD_RANK on $(hostname) backend=$VGPU_BACKEND"'
expect_rc 0
for r in 0 1; do expect_out "^rank $r on $HOST_A backend=ring\$"; done
for r in 2 3; do expect_out "^rank $r on $HOST_B backend=ring\$"; done

# ---- 2. the same training across the two hosts and on one ----
extra=()
deterministic=0
if "$TRAIN" --help-config 2>/dev/null | grep -q 'deterministic'; then
  extra=(--set train.deterministic=true)
  deterministic=1
fi
bytes0=$(veth_bytes)
run "4 ranks on 2 hosts" 90 "${ON_A[@]}" "${VGPURUN[@]}" --verbose -- "$TRAIN" "$CONFIG" "${extra[@]}"
crossed=$(($(veth_bytes) - bytes0))
two_hosts=$out
expect_rc 0
expect_out '^vgpurun: mpirun -np 4 --hostfile '
expect_out 'vgpu: no GPU: 4 CPU-simulated virtual GPUs \(4 ranks, 2 hosts\)'
expect_out "^ +0 +$HOST_A +0 +cpu0 "
expect_out "^ +1 +$HOST_A +1 +cpu0 "
expect_out "^ +2 +$HOST_B +0 +cpu0 "
expect_out "^ +3 +$HOST_B +1 +cpu0 "
expect_out 'collectives: ring'
expect_out '^vgpu_train: done ranks=4 devices=2xcpu/4vgpu .*status=ok$'
loss2=$(summary_field test_loss) crc2=$(summary_field params_crc) steps=$(summary_field steps)

# The ring's cross-host links carry ~2 x model size per step each way
# (reduce-scatter + all-gather); launch and control traffic alone stay far below.
if [ "${crossed:-0}" -gt $((1 << 20)) ]; then
  ok "$crossed bytes crossed the veth ($steps steps)"
else
  bad "only ${crossed:-?} bytes crossed the veth: the ring did not go between hosts"
fi

run "4 ranks on 1 host (reference)" 90 "${ON_A[@]}" "$MPIRUN" -np 4 "$TRAIN" "$CONFIG" --quiet "${extra[@]}"
expect_rc 0
loss1=$(summary_field test_loss) crc1=$(summary_field params_crc)
echo "--- two hosts: test_loss=$loss2 params_crc=$crc2; one host: test_loss=$loss1 params_crc=$crc1"
if [ "$deterministic" = 1 ]; then
  if [ -n "$crc1" ] && [ "$crc1" = "$crc2" ]; then ok "params_crc equal (deterministic mode)"
  else bad "params_crc differ in deterministic mode: $crc2 (two hosts) vs $crc1 (one host)"; fi
else
  # Without deterministic mode the float sums may run in another order.
  if [ -n "$loss1" ] && [ -n "$loss2" ] &&
     [ "$(echo "d = $loss2 - $loss1; if (d < 0) d = -d; d <= 0.005" | bc)" = 1 ]; then
    ok "test_loss equal within 0.005"
  else
    bad "test_loss differ: $loss2 (two hosts) vs $loss1 (one host)"
  fi
fi
expect_no_shm
finish
