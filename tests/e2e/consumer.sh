#!/usr/bin/env bash
# consumer.sh: vgpu as a library a user installs. `cmake --install` into a
# fresh prefix; a project outside the tree (tests/consumer) finds it with
# find_package(vgpu) and builds a program that checks every collective of the
# public API (and the library's example); the same program built with
# pkg-config alone; both run under the installed vgpurun on 4 ranks. libvgpu
# exports only vgpu_* symbols, and its soname carries the major version. The
# static archive too: through find_package (vgpu::vgpu_static) and
# pkg-config (vgpu-static), with only vgpu_* global in it.
source "$(dirname "$0")/lib.sh"
prefix=$WORK/prefix
CONSUMER=$VGPU_SOURCE_DIR/tests/consumer
EXAMPLE=$VGPU_SOURCE_DIR/worker/examples/linear_regression.c
# A sanitizer build's libvgpu needs its runtime first in the program: build
# the consumer with the same flags.
san=()
grep -q '^VGPU_SANITIZE:BOOL=ON' "$VGPU_BUILD_DIR/CMakeCache.txt" && san=(-fsanitize=address,undefined)

run "cmake --install" 120 cmake --install "$VGPU_BUILD_DIR" --prefix "$prefix"
expect_rc 0
for f in include/vgpu/vgpu.h include/vgpu/vgpu_ext.h include/vgpu/status.h bin/vgpurun bin/vgpurun-rank bin/vgpu_train \
         bin/vgpu-flight lib/libvgpu.so lib/libvgpu.a lib/cmake/vgpu/vgpuConfig.cmake \
         lib/pkgconfig/vgpu.pc lib/pkgconfig/vgpu-static.pc; do
  if [ -e "$prefix/$f" ]; then ok "installed $f"; else bad "$f not installed"; fi
done
soname=$(objdump -p "$prefix/lib/libvgpu.so" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" = libvgpu.so.0 ]; then ok "soname $soname"; else bad "soname '$soname'"; fi
# Defined dynamic symbols: vgpu_* and the version nodes (VGPU_0, VGPU_PRIVATE_0), nothing else.
others=$(nm -D --defined-only "$prefix/lib/libvgpu.so" | awk '{ print $NF }' | grep -v -e '^vgpu_' -e '^VGPU_0$' -e '^VGPU_PRIVATE_0$')
exported=$(nm -D --defined-only "$prefix/lib/libvgpu.so" | grep -c ' vgpu_')
if [ -z "$others" ] && [ "$exported" -ge 20 ]; then ok "exports only vgpu_* ($exported symbols)"
else out=$others; bad "exports besides vgpu_*: $(head -5 <<<"$others" | tr '\n' ' ')"; fi

# Both public headers' functions are exported under VGPU_0; what
# vgpu_train's math calls (vgpu/vgpu_math.h, not installed) only under the
# private node, exactly those four, and no kernel by any name.
dyn=$(nm -D --defined-only --with-symbol-versions "$prefix/lib/libvgpu.so")
missing=""
for sym in vgpu_launch_host_func vgpu_reduce vgpu_send vgpu_all_reduce_update vgpu_all_reduce_tree; do
  grep -q " $sym@@VGPU_0\$" <<<"$dyn" || missing="$missing $sym"
done
if [ -z "$missing" ]; then ok "exports vgpu.h's and vgpu_ext.h's functions (VGPU_0)"
else bad "not exported under VGPU_0:$missing"; fi
if [ -e "$prefix/include/vgpu/vgpu_math.h" ] || [ -e "$prefix/include/math_ops.h" ]; then
  bad "vgpu_train's math header is installed"
else ok "vgpu_train's math header is not installed"; fi
private=$(grep '@@VGPU_PRIVATE_0$' <<<"$dyn" | awk '{ print $NF }' | sed 's/@@.*//' | sort | tr '\n' ' ')
kernels=$(grep -cE ' (vgpu_|math_)?(gemm|softmax_xent|adam_step)@' <<<"$dyn")
if [ "$private" = "vgpu_math_check_range vgpu_math_device vgpu_math_for vgpu_math_op_begin vgpu_math_op_end vgpu_math_wait vgpu_math_zero " ] &&
   [ "$kernels" = 0 ]; then ok "vgpu_train's math: 7 calls under VGPU_PRIVATE_0 (the timeline's op counts among them), no kernel exported"
else out=$(grep -e PRIVATE -e gemm <<<"$dyn"); bad "under VGPU_PRIVATE_0: '$private'; $kernels kernels exported"; fi

# The core header is the NCCL/CUDA-shaped API alone: each installed header
# compiles by itself, and what vgpu_ext.h adds (vgpu_timeline_write here) is
# not declared by vgpu.h.
hdr=$WORK/headers
mkdir -p "$hdr"
for h in vgpu vgpu_ext status; do
  printf '#include <vgpu/%s.h>\nint vgpu_header_compiles;\n' "$h" >"$hdr/$h.c"
  run "$h.h alone" 60 cc -std=c11 -Wall -Werror -I"$prefix/include" -c "$hdr/$h.c" -o "$hdr/$h.o"
  if [ "$rc" = 0 ]; then ok "vgpu/$h.h compiles by itself"; else bad "vgpu/$h.h does not compile by itself"; fi
done
printf '#include <vgpu/vgpu.h>\nint main(void) { return vgpu_timeline_write(0); }\n' >"$hdr/core.c"
run "vgpu.h without vgpu_ext.h" 60 cc -std=c11 -Werror=implicit-function-declaration \
  -I"$prefix/include" -c "$hdr/core.c" -o "$hdr/core.o"
if [ "$rc" != 0 ] && grep -q vgpu_timeline_write <<<"$out"; then ok "vgpu.h alone does not declare vgpu_ext.h's functions"
else bad "vgpu.h alone declares vgpu_timeline_write (exit $rc)"; fi
core=$(grep -cE '^[a-z].*\bvgpu_[a-z_0-9]+\(' "$prefix/include/vgpu/vgpu.h")
if [ "$core" -ge 25 ] && [ "$core" -le 35 ]; then ok "vgpu.h declares $core functions (25-35)"
else bad "vgpu.h declares $core functions, not 25-35"; fi

# The archive's defined global symbols: vgpu_* only.
others=$(nm "$prefix/lib/libvgpu.a" | awk 'NF == 3 && $2 ~ /^[A-TV-Z]$/ { print $3 }' | grep -v '^vgpu_')
if [ -z "$others" ]; then ok "libvgpu.a: only vgpu_* global"
else out=$others; bad "libvgpu.a defines globals besides vgpu_*: $(head -5 <<<"$others" | tr '\n' ' ')"; fi

# The installed trainer is libvgpu's first user: it runs on the installed library.
libs=$(ldd "$prefix/bin/vgpu_train")
found=$(awk '$1 == "libvgpu.so.0" { print $3 }' <<<"$libs")
if [ -n "$found" ] && [ "$(realpath "$found")" = "$(realpath "$prefix/lib/libvgpu.so.0")" ]; then
  ok "the installed vgpu_train runs on the installed libvgpu.so.0"
else out=$libs; bad "the installed vgpu_train's libvgpu is not the installed one"; fi
run "installed vgpu_train on 2 ranks" 120 "$prefix/bin/vgpurun" -np 2 -- "$prefix/bin/vgpu_train" \
  "$VGPU_SOURCE_DIR/configs/synthetic_small.ini" --set train.epochs=1 --quiet
expect_rc 0
expect_out 'status=ok$'

# ---- find_package(vgpu) ----
run "configure the consumer (find_package)" 120 cmake -S "$CONSUMER" -B "$WORK/cbuild" \
  -DCMAKE_PREFIX_PATH="$prefix" -DVGPU_EXAMPLE="$EXAMPLE" -DCMAKE_C_FLAGS="${san[*]}"
expect_rc 0
run "build the consumer" 120 cmake --build "$WORK/cbuild"
expect_rc 0
# (ldd's output taken whole: grep -q stopping early would fail the pipeline)
libs=$(ldd "$WORK/cbuild/consumer")
if grep -q "libvgpu.so.0 => $prefix/lib/libvgpu.so.0" <<<"$libs"; then
  ok "the consumer runs with the installed libvgpu.so.0"
else out=$libs; bad "the consumer's libvgpu is not the installed one"; fi
run "consumer on 4 ranks (installed vgpurun)" 120 "$prefix/bin/vgpurun" -np 4 -- "$WORK/cbuild/consumer"
expect_rc 0
expect_out '^consumer: 4 ranks \(cpu, ring\), libvgpu 0\.1\.0: [0-9]+ checks a rank, 0 failed$'
run "the example on 4 ranks" 120 "$prefix/bin/vgpurun" -np 4 -- "$WORK/cbuild/linreg"
expect_rc 0
expect_out '^linreg: computing on device memory \(vgpu_launch_host_func\)$'
expect_out '^linreg: 4 ranks \(cpu, ring\): replicas equal, largest \|w - w_true\| 0\.0[0-9]+: learnt$'
libs=$(ldd "$WORK/cbuild/consumer_static")
if [ -n "$libs" ] && ! grep -q libvgpu <<<"$libs"; then ok "consumer_static needs no libvgpu.so"
else out=$libs; bad "consumer_static loads libvgpu.so"; fi
run "consumer_static on 3 ranks" 120 "$prefix/bin/vgpurun" -np 3 -- "$WORK/cbuild/consumer_static"
expect_rc 0
expect_out '^consumer: 3 ranks \(cpu, ring\), libvgpu 0\.1\.0: [0-9]+ checks a rank, 0 failed$'
run "consumer on 3 ranks, mpi backend" 120 "$prefix/bin/vgpurun" -np 3 --backend mpi -- "$WORK/cbuild/consumer"
expect_rc 0
expect_out '^consumer: 3 ranks \(cpu, mpi\), libvgpu 0\.1\.0: [0-9]+ checks a rank, 0 failed$'

# ---- pkg-config alone ----
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs vgpu 2>&1 | sed 's/ *$//')
if [ "$flags" = "-I$prefix/lib/pkgconfig/../../include -L$prefix/lib/pkgconfig/../../lib -lvgpu" ]; then
  ok "pkg-config: $flags"
else bad "pkg-config --cflags --libs vgpu: $flags"; fi
run "cc with pkg-config" 120 cc "${san[@]}" "$CONSUMER/consumer.c" $flags -Wl,-rpath,"$prefix/lib" -o "$WORK/consumer-pc"
expect_rc 0
run "pkg-config build on 2 ranks" 120 "$prefix/bin/vgpurun" -np 2 -- "$WORK/consumer-pc"
expect_rc 0
expect_out '^consumer: 2 ranks \(cpu, ring\), libvgpu 0\.1\.0: [0-9]+ checks a rank, 0 failed$'
run "cc with pkg-config vgpu-static" 120 cc "${san[@]}" "$CONSUMER/consumer.c" \
  $(pkg-config --cflags --libs vgpu-static) -o "$WORK/consumer-pc-static"
expect_rc 0
run "pkg-config static build on 2 ranks" 120 "$prefix/bin/vgpurun" -np 2 -- "$WORK/consumer-pc-static"
expect_rc 0
expect_out '^consumer: 2 ranks \(cpu, ring\), libvgpu 0\.1\.0: [0-9]+ checks a rank, 0 failed$'
expect_no_shm
finish
