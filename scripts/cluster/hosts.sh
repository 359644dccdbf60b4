#!/usr/bin/env bash
# hosts.sh: N local "hosts" made of network namespaces, for rehearsing a
# multi-host job on one machine. Each host has its own network stack, its own
# hostname and one NIC (veth) on a private /24 joined by a bridge; this machine
# sits on the bridge too, so mpirun started here launches ranks on the hosts
# (through a launch agent that enters the host's namespaces, in place of ssh).
# Links can be slowed (bandwidth with tbf; latency with netem when the kernel
# has it). Needs root. Nothing leaves the machine.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/cluster/hosts.sh up N [--link MODEL] [--slots S] [--name NAME]
       scripts/cluster/hosts.sh link MODEL [--name NAME]
       scripts/cluster/hosts.sh env|status|down [--name NAME]
       scripts/cluster/hosts.sh exec [--name NAME] I COMMAND...

  up N        make N hosts (1..64) NAME-h0..NAME-h<N-1>, each with S slots (default
              2), write a hostfile and the variables Open MPI needs; prints how to use them
  link MODEL  change the link model of running hosts
  env         print the exports for this shell: eval "$(scripts/cluster/hosts.sh env)"
  status      what is up: hosts, addresses, link model, processes on each host
  down        stop everything on the hosts and remove exactly what up made
  exec I CMD  run CMD on host I (its network and hostname), e.g. exec 0 hostname

  MODEL       none, or RATE[,LATENCY]: each host sends at most RATE (tc tbf), and a
              packet takes LATENCY from host to host (tc netem; needs a kernel with
              sch_netem). RATE: e.g. 100mbit, 1gbit, 10gbit; LATENCY: e.g. 50us, 2ms
  --name NAME the set of hosts (default vgpu; 1-8 of a-z0-9): several sets can be up
              at once. State lives in /run/vgpu-cluster/hosts-NAME.

example:
  scripts/cluster/hosts.sh up 4 --link 1gbit
  eval "$(scripts/cluster/hosts.sh env)"
  build/vgpurun -np 8 --hostfile "$VGPU_HOSTFILE" -- build/vgpu_train configs/default.ini
  scripts/cluster/hosts.sh down
EOF
}

die() { echo "hosts.sh: $*" >&2; exit 1; }
bad_usage() { echo "hosts.sh: $*" >&2; echo "(scripts/cluster/hosts.sh --help)" >&2; exit 2; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
cmd=$1
shift
case $cmd in -h|--help|help) usage; exit 0 ;; esac

name=vgpu slots=2 link=""
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --name) name=${2:-}; shift 2 || bad_usage "--name needs a value" ;;
    --slots) slots=${2:-}; shift 2 || bad_usage "--slots needs a value" ;;
    --link) link=${2:-}; shift 2 || bad_usage "--link needs a value" ;;
    -h|--help) usage; exit 0 ;;
    -*) bad_usage "unknown option '$1'" ;;
    # exec I COMMAND...: everything after I is the command's.
    *) args+=("$1"); shift
       if [ "$cmd" = exec ]; then break; fi ;;
  esac
done
[[ $name =~ ^[a-z0-9]{1,8}$ ]] || bad_usage "--name '$name': 1 to 8 of a-z and 0-9"
[[ $slots =~ ^[1-9][0-9]{0,2}$ ]] || bad_usage "--slots '$slots': a count from 1"

state=/run/vgpu-cluster/hosts-$name
bridge=$name-br

# parse_link MODEL: sets rate, latency, rate_bps ("" for none).
parse_link() {
  rate="" latency="" rate_bps=""
  [ "$1" = none ] && return 0
  local r=${1%%,*} l=""
  [[ $1 == *,* ]] && l=${1#*,}
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)(kbit|mbit|gbit|tbit)$ ]] ||
    bad_usage "link rate '$r': a number with kbit, mbit, gbit or tbit (e.g. 1gbit)"
  local mult
  case ${BASH_REMATCH[3]} in kbit) mult=1e3 ;; mbit) mult=1e6 ;; gbit) mult=1e9 ;; tbit) mult=1e12 ;; esac
  rate_bps=$(awk -v v="${BASH_REMATCH[1]}" -v m="$mult" 'BEGIN { printf "%.0f", v * m }')
  [ "$rate_bps" -ge 8000 ] || bad_usage "link rate '$r': at least 8kbit"
  rate=$r
  if [ -n "$l" ]; then
    [[ $l =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]] ||
      bad_usage "link latency '$l': a number with us, ms or s (e.g. 50us)"
    latency=$l
  fi
}

# apply_link HOST_NS: the host's egress qdisc from rate/latency (none: the default).
apply_link() {
  local ns=$1
  ip -n "$ns" link set eth0 up
  tc -n "$ns" qdisc del dev eth0 root 2>/dev/null || true
  [ -z "$rate" ] && [ -z "$latency" ] && return 0
  local parent=root
  if [ -n "$latency" ]; then
    tc -n "$ns" qdisc add dev eth0 root handle 1: netem delay "$latency" limit 100000
    parent="parent 1:1"
  fi
  if [ -n "$rate" ]; then
    # tbf's bucket must hold what the rate earns in a timer tick (1/250 s at
    # worst) or it cannot reach the rate; a bigger one lets bursts through.
    local burst=$((rate_bps / 8 / 250))
    [ "$burst" -lt 65536 ] && burst=65536
    # shellcheck disable=SC2086 # parent is two words or one
    tc -n "$ns" qdisc add dev eth0 $parent handle 10: tbf rate "$rate" burst "$burst" latency 100ms
  fi
}

need_root() {
  [ "$(id -u)" = 0 ] || die "needs root (network namespaces, veth links, tc): run it with sudo"
  local c
  for c in ip tc nsenter unshare; do
    command -v "$c" >/dev/null || die "$c not found (apt-get install iproute2 util-linux)"
  done
}

is_up() { [ -f "$state/hosts" ]; }
hosts_of() { cut -d' ' -f1 "$state/hosts"; }

netem_missing() {
  # The kernel names an unknown qdisc kind; probe on a throw-away veth pair.
  local probe=vgpq$$ rc=0
  ip link add "$probe" type veth peer name "${probe}b" || die "cannot make a veth link to probe for netem"
  tc qdisc add dev "$probe" root netem delay 1us 2>/dev/null || rc=$?
  ip link del "$probe" 2>/dev/null || true
  [ "$rc" != 0 ]
}

cmd_up() {
  [ ${#args[@]} = 1 ] || bad_usage "up takes the number of hosts: up N"
  n=${args[0]}
  [[ $n =~ ^[1-9][0-9]?$ ]] && [ "$n" -le 64 ] || bad_usage "up '$n': a number of hosts from 1 to 64"
  need_root
  parse_link "${link:-none}"
  if [ -n "$latency" ] && netem_missing; then
    die "this kernel has no netem (CONFIG_NET_SCH_NETEM), so latency cannot be modelled; give a rate only (--link ${rate:-1gbit})"
  fi
  is_up && die "hosts '$name' are already up ($state): scripts/cluster/hosts.sh down --name $name first"
  ip link show "$bridge" >/dev/null 2>&1 &&
    die "a link named $bridge exists but no state in $state: remove it (ip link del $bridge)"

  # A /24 that no interface or route of this machine uses.
  local net="" i
  for i in $(seq 213 254); do
    if ! ip -4 -o addr show | grep -q " 10\.$i\.77\." && ! ip -4 route show | grep -q "^10\.$i\.77\."; then
      net=10.$i.77
      break
    fi
  done
  [ -n "$net" ] || die "no free 10.x.77.0/24 subnet for the hosts"

  mkdir -p "$state"
  : >"$state/hosts"
  # From here on a failure undoes what was made.
  trap 'echo "hosts.sh: up failed; undoing" >&2; cmd_down >/dev/null 2>&1 || true' ERR
  echo "$net" >"$state/net"
  echo "${link:-none}" >"$state/link"
  ip link add "$bridge" type bridge
  ip addr add "$net.254/24" dev "$bridge"
  ip link set "$bridge" up
  for ((i = 0; i < n; i++)); do
    local ns=$name-h$i port=$name-p$i
    ip netns add "$ns"
    echo "$ns $net.$((i + 1))" >>"$state/hosts"
    # The host's hostname, kept in a bind-mounted UTS namespace (no process holds it).
    touch "$state/$ns.uts"
    unshare --uts="$state/$ns.uts" hostname "$ns"
    ip link add "$port" type veth peer name eth0 netns "$ns"
    ip link set "$port" master "$bridge" up
    ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
    ip -n "$ns" link set lo up
    apply_link "$ns"
  done
  for ((i = 0; i < n; i++)); do echo "$net.$((i + 1)) slots=$slots"; done >"$state/hostfile"

  # Open MPI's launch agent (plm_rsh_agent): `agent HOST COMMAND...` as ssh.
  {
    echo '#!/bin/sh'
    echo "# hosts.sh agent for the hosts '$name': enters HOST's namespaces in place of ssh"
    echo 'host=$1; shift'
    echo 'case $host in'
    while read -r ns addr; do echo "  $addr|$ns) ns=$ns ;;"; done <"$state/hosts"
    echo '  *) echo "hosts.sh agent: $host is not one of the local hosts '"'$name'"'" >&2; exit 255 ;;'
    echo 'esac'
    echo "exec nsenter --net=/run/netns/\$ns --uts=$state/\$ns.uts sh -c \"\$*\""
  } >"$state/agent"
  chmod 755 "$state/agent"
  cat >"$state/env" <<EOF
export VGPU_HOSTFILE=$state/hostfile
export OMPI_MCA_plm_rsh_agent=$state/agent
export OMPI_MCA_btl_tcp_if_include=$net.0/24
export OMPI_MCA_oob_tcp_if_include=$net.0/24
EOF
  trap - ERR
  echo "hosts.sh: $n hosts up ($name-h0..$name-h$((n - 1)), $net.1-$net.$n, $slots slots each," \
       "link ${link:-none})"
  echo "  hostfile: $state/hostfile ($((n * slots)) ranks)"
  echo "  in your shell: eval \"\$(scripts/cluster/hosts.sh env${name:+ --name $name})\""
  echo "  then:          build/vgpurun -np $((n * slots)) --hostfile \"\$VGPU_HOSTFILE\" -- build/vgpu_train configs/default.ini"
  echo "  stop:          scripts/cluster/hosts.sh down --name $name"
}

cmd_link() {
  [ ${#args[@]} = 1 ] || bad_usage "link takes one model: link RATE[,LATENCY] or link none"
  need_root
  is_up || die "hosts '$name' are not up (scripts/cluster/hosts.sh up N --name $name)"
  link=${args[0]}
  parse_link "$link"
  if [ -n "$latency" ] && netem_missing; then
    die "this kernel has no netem (CONFIG_NET_SCH_NETEM), so latency cannot be modelled; give a rate only"
  fi
  local ns
  for ns in $(hosts_of); do apply_link "$ns"; done
  echo "$link" >"$state/link"
  echo "hosts.sh: link model of '$name' is now $link"
}

cmd_env() {
  is_up || die "hosts '$name' are not up (scripts/cluster/hosts.sh up N --name $name)"
  cat "$state/env"
}

cmd_status() {
  if ! is_up; then
    echo "hosts.sh: hosts '$name' are not up"
    return 0
  fi
  echo "hosts '$name': link $(cat "$state/link"), hostfile $state/hostfile"
  local ns addr
  while read -r ns addr; do
    printf '  %-12s %-15s processes: %s\n' "$ns" "$addr" "$(ip netns pids "$ns" 2>/dev/null | wc -l)"
  done <"$state/hosts"
}

cmd_exec() {
  [ ${#args[@]} = 1 ] && [ $# -ge 1 ] || bad_usage "exec takes a host index and a command: exec 0 hostname"
  is_up || die "hosts '$name' are not up"
  local ns=$name-h${args[0]}
  grep -q "^$ns " "$state/hosts" || die "no host '${args[0]}' in '$name' (hosts: $(hosts_of | tr '\n' ' '))"
  exec nsenter --net="/run/netns/$ns" --uts="$state/$ns.uts" "$@"
}

cmd_down() {
  need_root
  if [ ! -d "$state" ]; then
    echo "hosts.sh: hosts '$name' are not up; nothing to do"
    return 0
  fi
  local ns left=0 p
  for ns in $(hosts_of 2>/dev/null); do
    # Whatever still runs on the host (a stray orted or rank) goes first.
    for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  done
  for ns in $(hosts_of 2>/dev/null); do
    for _ in $(seq 50); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    # The link first: a deleted namespace goes (with its end) only when the
    # kernel gets to it, and this end would linger until then.
    ip link del "$name-p${ns##*-h}" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    umount "$state/$ns.uts" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  rm -rf "$state"
  rmdir /run/vgpu-cluster 2>/dev/null || true
  # What is left, if anything, is said.
  for ns in $(ip netns list 2>/dev/null | grep -o "^$name-h[0-9]*"); do
    echo "hosts.sh: namespace $ns is still there" >&2; left=1
  done
  ip link show "$bridge" >/dev/null 2>&1 && { echo "hosts.sh: $bridge is still there" >&2; left=1; }
  ip -o link show | grep -q " $name-p[0-9]*@" && { echo "hosts.sh: links $name-p* are still there" >&2; left=1; }
  [ "$left" = 0 ] || exit 1
  echo "hosts.sh: hosts '$name' are down"
}

case $cmd in
  up) cmd_up ;;
  link) cmd_link ;;
  env) cmd_env ;;
  status) cmd_status ;;
  exec) cmd_exec "$@" ;;
  down) cmd_down ;;
  *) bad_usage "unknown command '$cmd' (up, link, env, status, exec, down)" ;;
esac
