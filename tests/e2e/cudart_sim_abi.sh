#!/usr/bin/env bash
# cudart_sim_abi.sh: the simulated libcudart.so.13 (launcher/cudart_sim/)
# stands in for the toolkit's: its SONAME, every export under the version
# node libcudart.so.13 and a name the real library exports too; a program
# linked against the REAL libcudart (cudart_sim_probe) runs on it with
# LD_LIBRARY_PATH at build/cudart_sim, with no version warning from the
# loader, and sees the simulated devices.
source "$(dirname "$0")/lib.sh"
SIM_DIR="$VGPU_BUILD_DIR/cudart_sim"
SIM="$SIM_DIR/libcudart.so.13"
PROBE="$VGPU_BUILD_DIR/cudart_sim_probe"
REAL=/usr/local/cuda/lib64/libcudart.so.13
[ -f "$SIM" ] && [ -x "$PROBE" ] || skip "not built (needs the CUDA toolkit)"
command -v objdump >/dev/null || skip "no objdump (binutils)"

out=$(objdump -p "$SIM")
if grep -qE 'SONAME +libcudart\.so\.13$' <<<"$out"; then ok "SONAME libcudart.so.13"; else bad "SONAME"; fi
# defined global symbols: "VERSION NAME", one a line
exports() { objdump -T "$1" | awk '$2 == "g" && $4 != "*UND*" { print $(NF - 1), $NF }'; }
out=$(exports "$SIM")
n=$(grep -c '^libcudart\.so\.13 cuda' <<<"$out")
others=$(grep -v '^libcudart\.so\.13 \(cuda\|libcudart\.so\.13$\)' <<<"$out")
if [ "$n" -ge 40 ] && [ -z "$others" ]; then ok "$n exports, all cuda* under libcudart.so.13"
else bad "exports: $n under libcudart.so.13; others: $others"; fi
if [ -f "$REAL" ]; then
  missing=$(comm -23 <(awk '{ print $2 }' <<<"$out" | grep '^cuda' | sort) \
                     <(exports "$REAL" | awk '{ print $2 }' | sort))
  if [ -z "$missing" ]; then ok "every export is one of the real library's"
  else out=$missing; bad "exports the real libcudart.so.13 lacks"; fi
fi
# the probe asks for the real library's versioned symbols
out=$(objdump -T "$PROBE")
if grep -qE '\*UND\*.*\(libcudart\.so\.13\) +cudaMalloc$' <<<"$out"; then ok "the probe binds cudaMalloc@libcudart.so.13"
else bad "the probe has no versioned reference to cudaMalloc"; fi

run "the probe on 2x1G/name=sim,1x2G" 30 env LD_LIBRARY_PATH="$SIM_DIR" \
  VGPU_SIM_GPUS="2x1G/name=sim,1x2G" CUDA_VISIBLE_DEVICES=2,1 "$PROBE"
expect_rc 0
expect_out "^library $SIM_DIR/libcudart\.so\.13\$"
expect_out '^runtime 13000$'
expect_out '^devices 2$'
expect_out '^device 0 name Simulated GPU 2\.0 GiB bus 0000:12:00\.0 memory 2147483648$'
expect_out '^device 1 name sim bus 0000:11:00\.0 memory 1073741824$'
expect_out '^round trip exact, pointer type 2 on device 1$'
expect_no_out 'no version information|symbol lookup error'

run "the probe without a driver" 30 env LD_LIBRARY_PATH="$SIM_DIR" VGPU_SIM_GPUS=nodriver "$PROBE"
expect_rc 1
expect_out '^library .*/cudart_sim/libcudart\.so\.13$'
expect_out '^FAILED cudaGetDeviceCount\(&count\): cudaErrorInsufficientDriver \(35\)$'
finish
