#!/usr/bin/env bash
# structure_limits.sh: the project's sources keep the house's limits
# (scripts/structure_limits.py: files <= 700 lines, functions <= 120, no
# circle of folders), and the checker can fail: a throw-away tree holds each
# breach at its boundary (700 lines pass and 701 fail; a 120-line function
# passes and 121 fail; two folders that include each other fail; a
# declaration, a macro body or a table initializer is no function).
source "$(dirname "$0")/lib.sh"
CHECK="$VGPU_SOURCE_DIR/scripts/structure_limits.py"

run "the project's sources" 60 python3 "$CHECK" "$VGPU_SOURCE_DIR"
if [ "$rc" = 0 ]; then ok "$(tail -n 1 <<<"$out")"; else bad "the project breaks the limits (exit $rc)"; fi

# fixture NAME: a fresh tree $T with one clean file, for one plant.
fixture() {
  T=$WORK/$1
  mkdir -p "$T/launcher/a" "$T/launcher/b" "$T/worker" "$T/common"
  printf '#include "b.h"\nint a(void) { return 1; }\n' >"$T/launcher/a/a.c"
  printf 'int b(void);\n' >"$T/launcher/b/b.h"
}
# lines N: N lines of code, each a statement.
lines() { for ((i = 0; i < $1; i++)); do echo "    x += $i;"; done; }
# function_of N: a function whose definition spans N lines, brace to brace.
function_of() { echo "int f(int x)"; echo "{"; lines $(($1 - 3)); echo "}"; }
# expect WHAT RC PATTERN: the checker on $T exits RC and, failing, says PATTERN.
expect() {
  run "$1" 60 python3 "$CHECK" "$T"
  if [ "$rc" != "$2" ]; then bad "$1: exit $rc, expected $2"
  elif [ -n "$3" ] && ! grep -q -- "$3" <<<"$out"; then bad "$1: no '$3' in the report"
  else ok "$1: exit $rc${3:+, says '$3'}"; fi
}

fixture file700; lines 700 >"$T/worker/big.c"
expect "a file of 700 lines" 0 ""
fixture file701; lines 701 >"$T/worker/big.c"
expect "a file of 701 lines" 1 "worker/big.c: 701 lines"
fixture fn120; { echo "// a comment { with a brace"; function_of 120; } >"$T/common/fn.c"
expect "a function of 120 lines" 0 ""
fixture fn121; { echo "static int g;"; function_of 121; } >"$T/common/fn.c"
expect "a function of 121 lines" 1 "common/fn.c:2: f is 121 lines"
# Multi-line signatures count from the name's line; a declaration, a table
# and a macro with braces are not functions.
fixture notfn
{
  echo "int f(int x);"
  echo "static const int t[] = {"; lines 130 | sed 's/x += //; s/;/,/'; echo "};"
  echo "#define M(x) \\"; echo "    do { \\"; lines 130 | sed 's/$/ \\/'; echo "    } while (0)"
  echo "static int"; echo "h(int x,"; echo "  int y)"; echo "{"; lines 116; echo "}"
} >"$T/common/notfn.c"
expect "a declaration, a table, a macro and a 120-line function over 3 lines" 0 ""
fixture notfn121
{ echo "static int"; echo "h(int x,"; echo "  int y)"; echo "{"; lines 117; echo "}"; } >"$T/common/h.c"
expect "a 121-line function over a 3-line signature" 1 "h is 121 lines"
fixture circle; printf '#include "a.h"\n' >>"$T/launcher/b/b.h"; printf 'int a(void);\n' >"$T/launcher/a/a.h"
expect "two folders that include each other" 1 "launcher/a <-> launcher/b"
fixture chain
mkdir -p "$T/launcher/c"
printf 'int a(void);\n' >"$T/launcher/a/a.h"
printf '#include "c.h"\n' >>"$T/launcher/b/b.h"
printf 'int c(void);\n' >"$T/launcher/c/c.h"
expect "a chain of folders without a circle" 0 ""
printf '#include "a.h"\n' >>"$T/launcher/c/c.h"
expect "a circle of three folders" 1 "launcher/a <-> launcher/b <-> launcher/c"
finish
