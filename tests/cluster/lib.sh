# lib.sh: helpers for the cluster tests (sourced after ../e2e/lib.sh): what a
# test needs (root, commands), a cleanup stack run on every exit, and
# shared-memory hygiene.

need_root() { [ "$(id -u)" = 0 ] || skip "needs root ($1)"; }

# need_cmds PACKAGE CMD...: skips unless every command is on PATH.
need_cmds() {
  local pkg=$1 c
  shift
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || skip "$c not found (apt-get install $pkg)"
  done
}

# Cleanup steps run in reverse order on exit, also after a failure or ^C.
CLEANUP=()
at_exit() { CLEANUP+=("$*"); }
# What scripts/cluster/hosts.sh needs (network namespaces, veth, tc), else skipped.
need_netns_hosts() {
  need_root "to create network namespaces"
  need_cmds iproute2 ip tc
  need_cmds util-linux unshare nsenter
}
# need_netns_hosts, and that hosts.sh can make one here (a container without
# CAP_SYS_ADMIN cannot), else skipped.
need_working_netns_hosts() {
  need_netns_hosts
  local hosts_sh=$VGPU_SOURCE_DIR/scripts/cluster/hosts.sh probe=q$(($$ % 10000000))
  at_exit "$hosts_sh down --name $probe"
  run "can this machine make hosts?" 30 "$hosts_sh" up 1 --name "$probe"
  [ "$rc" = 0 ] || skip "cannot make network-namespace hosts (a container without CAP_SYS_ADMIN?): $out"
  "$hosts_sh" down --name "$probe" >/dev/null 2>&1
}
run_cleanup_() {
  local i
  for ((i = ${#CLEANUP[@]} - 1; i >= 0; i--)); do eval "${CLEANUP[i]}" >/dev/null 2>&1 || true; done
  rm -rf "$WORK" "$SHM_DIR"
}
trap run_cleanup_ EXIT
trap 'exit 130' INT TERM

# Segments a killed rank can leave behind: /dev/shm/vgpu-* created after the
# test started that no process maps or holds open. Others' live jobs keep theirs.
SHM_BEFORE=$(ls /dev/shm 2>/dev/null | grep '^vgpu-' || true)
remove_orphan_shm() {
  local f
  for f in $(ls /dev/shm 2>/dev/null | grep '^vgpu-'); do
    grep -qxF "$f" <<<"$SHM_BEFORE" && continue
    grep -qsF "/dev/shm/$f" /proc/[0-9]*/maps && continue
    ls -l /proc/[0-9]*/fd 2>/dev/null | grep -qF "/dev/shm/$f" && continue
    rm -f "/dev/shm/$f"
  done
}
at_exit remove_orphan_shm

# summary_field NAME: the value of NAME= in the summary line of $out.
summary_field() { grep -E '^vgpu_train: done ' <<<"$out" | tail -1 | grep -oE "(^| )$1=[^ ]+" | cut -d= -f2; }
