#!/usr/bin/env bash
# terminal.sh: what a user at an 80-column terminal sees. Both launchers ask
# the ranks for the live bar when their own stdout is a terminal (the ranks'
# stdout is a pipe), and the bar stays on one line: the pane, with wrapped
# lines joined (tmux capture-pane -J), holds one line an epoch (its eval
# line: the bar is cleared for it and redrawn below) and the last bar, of at
# most 80 characters, made of whole fields.
source "$(dirname "$0")/lib.sh"
command -v tmux >/dev/null || skip "tmux is not installed (scripts/test.sh installs it as root)"
VGPURUN="$VGPU_BUILD_DIR/vgpurun"
# A tmux server of its own for each pane: a new session on a server still
# going down from kill-server fails ("server exited unexpectedly").
panes=0
socket() { echo "vgpu-test-$$-$panes"; }
tmux_() { tmux -L "$(socket)" -f /dev/null "$@"; }
trap 'for ((i = 1; i <= panes; i++)); do tmux -L "vgpu-test-$$-$i" kill-server 2>/dev/null; done; rm -rf "$WORK" "$SHM_DIR"' EXIT

# in_terminal NAME CMD...: runs CMD in a fresh 80x50 tmux pane (no
# VGPU_PROGRESS, VGPU_TERMINAL or COLUMNS of ours); sets $out to the pane, lines joined, and
# $rc to CMD's exit status.
in_terminal() {
  local name=$1
  shift
  [ "$panes" = 0 ] || tmux_ kill-server 2>/dev/null
  panes=$((panes + 1))
  # The pane's shell runs CMD, then prints its status where we can find it.
  tmux_ new-session -d -x 80 -y 50 \
    "env -u VGPU_PROGRESS -u VGPU_TERMINAL -u COLUMNS $(printf '%q ' "$@"); echo \"exit=\$?\"; sleep 60"
  out=""
  for _ in $(seq 1 600); do
    out=$(tmux_ capture-pane -p -J -S - 2>/dev/null)
    grep -q '^exit=[0-9]*$' <<<"$out" && break
    sleep 0.1
  done
  rc=$(sed -n 's/^exit=\([0-9]*\)$/\1/p' <<<"$out")
  echo "--- $name: exit ${rc:-none}"
}

# Two epochs: an eval line each, and the last bar (100%) before the last one.
expect_bar_lines() {
  local bars longest
  bars=$(grep -c '^\[[#.]*\] ' <<<"$out")
  longest=$(grep '^\[[#.]*\] ' <<<"$out" | awk '{ if (length > m) m = length } END { print m + 0 }')
  if [ "$bars" = 1 ] && [ "$longest" -le 80 ]; then
    ok "one bar line left, $longest characters"
  else
    bad "$bars bar lines left (want the last alone), the longest $longest characters"
  fi
  if [ "$(grep -c '^eval  epoch   [12] ' <<<"$out")" = 2 ] &&
     grep -A1 '^\[############\] 100% ' <<<"$out" | grep -q '^eval  epoch   2 '; then
    ok "an eval line an epoch, the last after the finished bar"
  else
    bad "the eval lines or the finished bar are missing"
  fi
  # Whole fields only: a field is never cut (the bar once ended in a bare "lr").
  if grep '^\[[#.]*\] ' <<<"$out" | grep -qE ' (lr|mem|acc|loss|step|epoch)$|[0-9]\.$'; then
    bad "a bar ends in a cut field: $(grep '^\[[#.]*\] ' <<<"$out" | tail -1)"
  else
    ok "the bar ends in a whole field"
  fi
}

args=("$TRAIN" "$CONFIGS/synthetic_small.ini" --set train.log_every=8)
in_terminal "scripts/mpirun.sh at 80 columns" "$MPIRUN" -np 2 "${args[@]}"
expect_rc 0
expect_bar_lines
expect_out '^vgpu_train: done ranks=2 .*status=ok'

in_terminal "vgpurun at 80 columns" "$VGPURUN" -np 2 -- "${args[@]}"
expect_rc 0
expect_bar_lines
expect_out '^vgpu_train: done ranks=2 .*status=ok'

# The user's own choice wins: progress lines, not the bar.
in_terminal "VGPU_PROGRESS=lines" env VGPU_PROGRESS=lines "$MPIRUN" -x VGPU_PROGRESS -np 2 "${args[@]}"
expect_rc 0
expect_no_out '^\[[#.]*\] '
expect_out '^epoch   2  step     64/64 '
finish
