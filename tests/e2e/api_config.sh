#!/usr/bin/env bash
# api_config.sh: a program's own section in the job's config file. libvgpu
# reads the file once, validates its own sections ([devices], [comm]) and
# leaves [myapp] and --set myapp.* to the program, which reads them from
# vgpu_config_text on every rank; a typo in a section vgpu owns is still
# refused, said once. vgpu_train, whose file is all vgpu's, refuses a section
# it does not know.
source "$(dirname "$0")/lib.sh"
PROG=$VGPU_BUILD_DIR/test_api_config
cat >"$WORK/app.ini" <<'INI'
[myapp]
greeting = hello
learning_rate = fast
[comm]
backend = mpi
timeout_s = 42
INI

run "a program's own section" 60 "$MPIRUN" -np 2 "$PROG" "$WORK/app.ini"
expect_rc 0
for r in 0 1; do
  expect_out "^api_config: rank $r of 2: backend mpi, greeting hello, timeout 42\$"
done

run "--set of the program's key and of vgpu's" 60 "$MPIRUN" -np 2 "$PROG" "$WORK/app.ini" \
  myapp.greeting=bonjour comm.backend=ring
expect_rc 0
for r in 0 1; do
  expect_out "^api_config: rank $r of 2: backend ring, greeting bonjour, timeout 42\$"
done

printf '[myapp]\ngreeting = hi\n[comm]\ntimeout = 42\n' >"$WORK/typo.ini"
run "a typo in [comm]" 60 "$MPIRUN" -np 2 "$PROG" "$WORK/typo.ini"
expect_rc 2
expect_out "typo.ini:4: unknown key 'timeout' in \[comm\]; did you mean 'comm.timeout_s'\?"
if [ "$(grep -c "unknown key 'timeout'" <<<"$out")" = 1 ]; then
  ok "said once"
else
  bad "said $(grep -c "unknown key 'timeout'" <<<"$out") times"
fi

printf '[trian]\nepochs = 1\n' >"$WORK/trian.ini"
run "vgpu_train: a section it does not know" 60 "$MPIRUN" -np 2 "$TRAIN" "$WORK/trian.ini"
expect_rc 2
expect_out "trian.ini:2: unknown section \[trian\] \(key 'epochs'\); did you mean 'train.epochs'\?"
if [ "$(grep -c "unknown section" <<<"$out")" = 1 ]; then
  ok "said once"
else
  bad "said $(grep -c "unknown section" <<<"$out") times"
fi
finish
