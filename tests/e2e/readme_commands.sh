#!/usr/bin/env bash
# readme_commands.sh: the README's commands run as a reader types them. The
# block of "Your own C/CUDA program on libvgpu" (install into $HOME/vgpu,
# build the example with pkg-config, run it under the installed vgpurun) is
# taken from README.md and run unchanged, from a directory laid out as the
# repository (worker/, build/), with HOME a fresh directory. Also: the
# documents name one machine per figure, and the Slurm scripts do not say a
# CUDA build fails on CPU-only nodes (it does not: the runtime is static).
source "$(dirname "$0")/lib.sh"
README=$VGPU_SOURCE_DIR/README.md

# block_with TEXT: the README's fenced block that contains TEXT (the lines
# between the fences).
block_with() {
  awk -v want="$1" '
    /^```/ { if (inside) { if (index(text, want)) { printf "%s", text; exit } inside = 0 }
             else { inside = 1; text = "" }
             next }
    inside { text = text $0 "\n" }' "$README"
}

block=$(block_with 'pkg-config --cflags --libs vgpu')
if [ -n "$block" ]; then ok "README's libvgpu block found"; else bad "no README block with pkg-config"; fi
# The reader's repository: the sources the block names, and `build`.
mkdir -p "$WORK/repo" "$WORK/home"
ln -s "$VGPU_SOURCE_DIR/worker" "$WORK/repo/worker"
ln -s "$VGPU_BUILD_DIR" "$WORK/repo/build"
printf '%s\n' "$block" >"$WORK/block.sh"
echo "--- the block, as README.md has it:"
sed 's/^/    /' "$WORK/block.sh"
# A sanitizer build's libvgpu needs its runtime first in the program.
if grep -q '^VGPU_SANITIZE:BOOL=ON' "$VGPU_BUILD_DIR/CMakeCache.txt"; then
  skip "the sanitizer build's libvgpu needs the program built with -fsanitize (consumer.sh covers it)"
fi
run "README block (bash -e)" 240 env -u PKG_CONFIG_PATH HOME="$WORK/home" \
  bash -ec "cd '$WORK/repo' && source '$WORK/block.sh'"
expect_rc 0
expect_out 'linreg: 4 ranks \(cpu, ring\): replicas equal, .*: learnt'
if [ -x "$WORK/repo/linreg" ]; then ok "the block built ./linreg"; else bad "no ./linreg"; fi

# One machine per figure: the README names the CPU of what it measured the
# same way everywhere (issue 32: "a 2-core Xeon VM" and "AMD EPYC" for the same one).
if grep -q '2-core Xeon VM' "$README"; then
  out=$(grep -n '2-core Xeon VM' "$README"); bad "README still says the figures come from '2-core Xeon VM'"
else ok "README does not call the EPYC machine a Xeon VM"; fi
# The CUDA runtime is linked statically: no script may tell users otherwise.
out=$(grep -n 'libcudart.so' "$VGPU_SOURCE_DIR"/scripts/slurm/* 2>/dev/null)
if [ -z "$out" ]; then ok "scripts/slurm do not warn about libcudart.so"
else bad "scripts/slurm still say a CUDA build needs libcudart.so on CPU-only nodes"; fi
libs=$(ldd "$VGPU_BUILD_DIR/vgpu_train")
if grep -qE 'libcudart|libnccl|libcublas' <<<"$libs"; then out=$libs; bad "vgpu_train links a CUDA library"
else ok "vgpu_train needs no CUDA library at load time"; fi
finish
