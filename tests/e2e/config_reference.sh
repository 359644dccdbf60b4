#!/usr/bin/env bash
# config_reference.sh: configs/reference.ini and docs/CONFIG.md (written by
# scripts/gen_config_doc.sh) match the schema and the two environment tables
# (libvgpu's, vgpu_train's) compiled into vgpu_train, and every shipped config
# parses.
source "$(dirname "$0")/lib.sh"

out=$(diff <("$TRAIN" --help-config) <(grep -v '^;' "$CONFIGS/reference.ini" | sed '1{/^$/d}'))
rc=$?
if [ "$rc" = 0 ]; then ok "configs/reference.ini is current"; else bad "configs/reference.ini differs from --help-config (regenerate it)"; fi

# docs/CONFIG.md is what scripts/gen_config_doc.sh writes from this build's
# --help-config and --help, unchanged.
run "gen_config_doc.sh" 30 "$VGPU_SOURCE_DIR/scripts/gen_config_doc.sh" "$VGPU_BUILD_DIR" "$WORK/CONFIG.md"
expect_rc 0
out=$(diff "$VGPU_SOURCE_DIR/docs/CONFIG.md" "$WORK/CONFIG.md")
if [ -z "$out" ] && [ -s "$WORK/CONFIG.md" ]; then ok "docs/CONFIG.md is current"
else bad "docs/CONFIG.md differs from what scripts/gen_config_doc.sh writes now (run it; the diff: < docs, > now)"; fi

# Every key --help-config lists, and every variable --help lists, is in docs/CONFIG.md.
doc=$(cat "$VGPU_SOURCE_DIR/docs/CONFIG.md")
keys=$("$TRAIN" --help-config | awk '/^\[.*\]$/ { s = substr($0, 2, length($0) - 2) } /^[a-z0-9_]+ = / { print s "." $1 }')
[ -n "$keys" ] || bad "vgpu_train --help-config lists no keys"
missing=""
for key in $keys; do grep -qF "| \`$key\` |" <<<"$doc" || missing="$missing $key"; done
if [ -z "$missing" ]; then ok "docs/CONFIG.md documents every key"; else out=$missing; bad "docs/CONFIG.md lacks keys:$missing"; fi
# --help's two environment lists, libvgpu's then vgpu_train's, each in its own
# table of docs/CONFIG.md.
help=$("$TRAIN" --help)
for who in libvgpu vgpu_train; do
  table=$(awk -v h="## Environment variables: $who" '$0 == h { on = 1; next } on && /^## / { on = 0 } on' <<<"$doc")
  names=$(awk -v who="$who" 'index($0, "environment (" who) == 1 { on = 1; next } on && /^$/ { on = 0 }
                             on && /^  [A-Z_][A-Z0-9_]*=/ { sub(/=.*/, ""); print $1 }' <<<"$help")
  [ -n "$names" ] || bad "vgpu_train --help lists no environment variables of $who"
  for name in $names; do
    if grep -q "^| \`$name=" <<<"$table"; then ok "docs/CONFIG.md documents $name ($who)"
    else bad "docs/CONFIG.md's environment table of $who lacks $name"; fi
  done
done

# Every shipped config trains a step on one CPU rank, but one sized for GPUs
# (a line "; sized for GPUs" in it: gpt2_124m.ini needs 20.6 GiB on one
# rank): that one is planned on a simulated 80 GB GPU, which sizes it
# against the GPU's caps without training.
for cfg in "$CONFIGS"/*.ini; do
  if grep -q '^; sized for GPUs' "$cfg"; then
    run "plan $(basename "$cfg") on a simulated 80 GB GPU" 60 env VGPU_SIM_GPUS=1x80G "$MPIRUN" -np 4 \
      "$TRAIN" "$cfg" --plan
    expect_rc 0
    expect_out "^vgpu_train: a rank's device memory, [0-9]+ parameters:$"
    continue
  fi
  run "parse $(basename "$cfg")" 120 "$MPIRUN" -np 1 "$TRAIN" "$cfg" --set train.max_steps=1 \
    --set train.epochs=1 --set data.train_limit=512 --set checkpoint.dir= --set sample.bytes=0 --quiet
  expect_rc 0
done
finish
