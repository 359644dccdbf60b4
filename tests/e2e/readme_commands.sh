#!/usr/bin/env bash
# readme_commands.sh: the commands of README.md and docs/ run as a reader
# types them. Every ```sh block of README.md, docs/*.md and docs/*/*.md has
# a marker on the line just before it (docs/TESTING.md):
#   <!-- commands: run [NAME=VALUE]... -->  this test runs the block unchanged
#       (bash -e) from a directory laid out as the repository (its folders
#       linked, build/ the build under test), with HOME a fresh directory and
#       the given variables set (VGPU_PLAN=1: a training job plans and exits);
#   <!-- commands: run by TEST[,TEST]...[: how] -->  the ctest tests named run
#       these commands; each must be registered in this build;
#   <!-- commands: not run: WHY -->  what no test can run here (a real
#       cluster), said in the document and listed below.
# A block without a marker fails. Also: the documents name one machine per
# figure, and the Slurm scripts do not say a CUDA build fails on CPU-only
# nodes (it does not: the runtime is static).
source "$(dirname "$0")/lib.sh"
SRC=$VGPU_SOURCE_DIR

# Each ```sh block into $WORK/blocks/N.sh; the manifest has, a block a line,
# "N <tab> FILE:LINE <tab> marker text" (empty when there is none).
mkdir -p "$WORK/blocks" "$WORK/repo" "$WORK/home"
: >"$WORK/blocks/manifest"
(cd "$SRC" && awk -v dir="$WORK/blocks" '
  FNR == 1 { prev = ""; state = "" }
  /^```/ {
    if (state == "sh") { state = ""; close(f) }
    else if (state == "other") state = ""
    else if ($0 ~ /^```sh[ \t]*$/) {
      n++; f = dir "/" n ".sh"; printf "" >f; state = "sh"
      m = prev
      if (m ~ /^<!-- commands: .* -->$/) { sub(/^<!-- commands: /, "", m); sub(/ -->$/, "", m) } else m = ""
      printf "%d\t%s:%d\t%s\n", n, FILENAME, FNR, m >>(dir "/manifest")
    } else state = "other"
    prev = $0; next
  }
  state == "sh" { print >f }
  { prev = $0 }' README.md docs/*.md docs/*/*.md)
count=$(wc -l <"$WORK/blocks/manifest")
if [ "$count" -gt 0 ]; then ok "$count sh blocks in README.md and docs/"; else bad "no sh block found"; fi

# The reader's repository: the source tree's folders, and build/.
for e in "$SRC"/*; do
  [ "$(basename "$e")" = build ] || ln -s "$e" "$WORK/repo/$(basename "$e")"
done
ln -s "$VGPU_BUILD_DIR" "$WORK/repo/build"
tests=$(cd "$VGPU_BUILD_DIR" && ctest -N | sed -n 's/^ *Test *#[0-9]*: //p')
sanitized=0
grep -q '^VGPU_SANITIZE:BOOL=ON' "$VGPU_BUILD_DIR/CMakeCache.txt" && sanitized=1
not_run=""
libvgpu_block=0

while IFS=$'\t' read -r -u 3 n where marker; do
  block="$WORK/blocks/$n.sh"
  case "$marker" in
    "run by "*)
      names=${marker#run by }
      names=${names%%:*}
      for t in ${names//,/ }; do
        if grep -qxF "$t" <<<"$tests"; then ok "$where: run by $t (registered)"
        else out=$marker; bad "$where: names test '$t', which this build does not register"; fi
      done
      ;;
    "run" | "run "*[A-Z]*=*)
      envs=${marker#run}
      # A sanitizer build's libvgpu needs its runtime first in the program
      # (consumer.sh covers that build).
      if grep -q 'pkg-config --cflags --libs vgpu' "$block"; then
        libvgpu_block=1
        if [ "$sanitized" = 1 ]; then echo "--- $where: not run (the sanitizer build's libvgpu needs the program built with -fsanitize)"; continue; fi
      fi
      echo "--- $where, as the document has it (run with$([ -n "$envs" ] && echo "$envs" || echo " nothing set")):"
      sed 's/^/    /' "$block"
      # shellcheck disable=SC2086 # the marker's NAME=VALUE words
      run "$where" 240 env -u PKG_CONFIG_PATH HOME="$WORK/home" $envs \
        bash -ec "cd '$WORK/repo' && source '$block'" </dev/null
      expect_rc 0
      if grep -q 'VGPU_PLAN=1' <<<"$envs"; then expect_out '^rank +host +local'; fi
      if grep -q 'vgpu_example_linreg\|pkg-config --cflags --libs vgpu' "$block"; then
        expect_out 'linreg: 4 ranks \(cpu, ring\): replicas equal, .*: learnt'
      fi
      if grep -q 'pkg-config --cflags --libs vgpu' "$block"; then
        if [ -x "$WORK/repo/linreg" ]; then ok "the block built ./linreg"; else bad "no ./linreg"; fi
      fi
      ;;
    "not run: "?*) not_run="$not_run$where: ${marker#not run: }"$'\n' ;;
    *) out=$(cat "$block"); bad "$where: a sh block without a valid '<!-- commands: ... -->' marker" ;;
  esac
done 3<"$WORK/blocks/manifest"
if [ "$libvgpu_block" = 1 ]; then ok "the libvgpu block (install, pkg-config, run) is among the run blocks"
else bad "no run block builds a program with pkg-config (docs/LIBRARY.md)"; fi
if [ -n "$not_run" ]; then echo "--- blocks no test runs here, as the documents say:"; printf '%s' "$not_run" | sed 's/^/    /'; fi

# One machine per figure: the documents name the CPU of what they measured
# the same way everywhere (issue 32: "a 2-core Xeon VM" and "AMD EPYC" for
# the same one).
out=$(cd "$SRC" && grep -n '2-core Xeon VM' README.md docs/*.md)
if [ -n "$out" ]; then bad "the documents still say the figures come from '2-core Xeon VM'"
else ok "no document calls the EPYC machine a Xeon VM"; fi
# The CUDA runtime is linked statically: no script may tell users otherwise.
out=$(grep -n 'libcudart.so' "$SRC"/scripts/slurm/* 2>/dev/null)
if [ -z "$out" ]; then ok "scripts/slurm do not warn about libcudart.so"
else bad "scripts/slurm still say a CUDA build needs libcudart.so on CPU-only nodes"; fi
libs=$(ldd "$VGPU_BUILD_DIR/vgpu_train")
if grep -qE 'libcudart|libnccl|libcublas' <<<"$libs"; then out=$libs; bad "vgpu_train links a CUDA library"
else ok "vgpu_train needs no CUDA library at load time"; fi
finish
