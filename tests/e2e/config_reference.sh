#!/usr/bin/env bash
# config_reference.sh: configs/reference.ini matches the schema compiled into
# vgpu_train, and every shipped config parses.
source "$(dirname "$0")/lib.sh"

out=$(diff <("$TRAIN" --help-config) <(grep -v '^;' "$CONFIGS/reference.ini" | sed '1{/^$/d}'))
rc=$?
if [ "$rc" = 0 ]; then ok "configs/reference.ini is current"; else bad "configs/reference.ini differs from --help-config (regenerate it)"; fi

# Every variable --help lists is in the README's table of environment variables.
table=$(sed -n '/^### Environment variables/,/^## /p' "$VGPU_SOURCE_DIR/README.md")
names=$("$TRAIN" --help | sed -n '/^environment:/,$s/^  \([A-Z_][A-Z0-9_]*\)=.*/\1/p')
[ -n "$names" ] || bad "vgpu_train --help lists no environment variables"
for name in $names; do
  if grep -q "^| \`$name\` |" <<<"$table"; then ok "README documents $name"; else bad "README's environment table lacks $name"; fi
done

for cfg in "$CONFIGS"/*.ini; do
  run "parse $(basename "$cfg")" 30 "$MPIRUN" -np 1 "$TRAIN" "$cfg" --set train.max_steps=1 --set train.epochs=1 --set data.train_limit=512 --set checkpoint.dir= --quiet
  expect_rc 0
done
finish
