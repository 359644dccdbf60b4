#!/usr/bin/env bash
# gpu_bundle.sh: the GPU bundle (scripts/gpu/bundle.sh) rehearsed on a machine
# without the Debian packages it carries, as the GPU machine is: a mount
# namespace hides Open MPI (mpirun, orterun, its libraries and components,
# help files), PMIx, hwloc, libevent, libinih, cmocka, the BLAS and every
# other optional package of the bundle, and ssh, bc and xz; the bundle is
# unpacked under /tmp/vgpu-gpu (a tmpfs there) with scripts/gpu/env.sh, and
# its mpirun runs a 2-rank vgpu_allreduce_perf, short 2-rank vgpu_train jobs
# (mpirun and vgpurun), ctest -L gpu from the unpacked build's test files,
# and scripts/gpu/check.sh --dry-run --quick.
# The bundle rehearsed: gpu-bundle/ when bundle.sh made one (what travels);
# else a quick one of this build made here (bundle.sh --from-build).
# Needs root and unshare; skipped, said, otherwise.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a mount namespace hides the Debian packages)"
command -v unshare >/dev/null || skip "needs unshare (util-linux)"
unshare -m true 2>/dev/null || skip "unshare -m is refused here (no CAP_SYS_ADMIN?)"
grep -qw overlay /proc/filesystems || skip "needs overlayfs (modprobe overlay) to hide the packages"
command -v dpkg-query >/dev/null || skip "needs dpkg (a Debian machine)"

bundle=${VGPU_GPU_BUNDLE:-$VGPU_SOURCE_DIR/gpu-bundle}
if [ -f "$bundle/runtime.tar.xz" ] && [ -f "$bundle/vgpu-build.tar.xz" ]; then
  echo "--- rehearsing $bundle (bundle.sh's)"
  quick_bundle=0
else
  bundle=$WORK/bundle
  run "bundle.sh --from-build (no gpu-bundle/ here)" 150 "$VGPU_SOURCE_DIR/scripts/gpu/bundle.sh" \
    --from-build "$VGPU_BUILD_DIR" --out "$bundle" --no-data --fast
  expect_rc 0
  [ "$rc" = 0 ] || { echo "$out" | tail -20; finish; exit; }
  quick_bundle=1
fi
grep -E '^(git|build|build_at):' "$bundle/MANIFEST.txt"

# What the namespace hides: the files of the bundle's packages that are not
# required or important in Debian (those a bare image has: zlib, libc, ...),
# in /usr/lib/x86_64-linux-gnu and /usr/bin, and tools the GPU image lacks.
hide=$WORK/hide
: >"$hide"
for p in $(sed -n 's/^  \([a-z0-9][^ ]*\) [^ ]*$/\1/p' "$bundle/MANIFEST.txt"); do
  prio=$(dpkg-query -W -f '${Priority}' "$p" 2>/dev/null) || continue
  case $prio in required|important) continue ;; esac
  dpkg-query -L "$p" 2>/dev/null | sed -nE 's#^(/usr)?/lib/x86_64-linux-gnu/([^/]+)(/.*)?$#lib:\2#p; s#^/usr/bin/([^/]+)$#bin:\1#p' >>"$hide"
done
printf 'bin:%s\n' mpirun mpiexec orterun orted ompi_info ssh rsh bc xz >>"$hide"
sort -u -o "$hide" "$hide"
echo "--- hiding $(grep -c '^lib:' "$hide") entries of /usr/lib/x86_64-linux-gnu and $(grep -c '^bin:' "$hide") of /usr/bin"
grep -qx 'lib:libmpi.so.40' "$hide" && grep -qx 'lib:openmpi' "$hide" && grep -qx 'bin:mpirun' "$hide" &&
  grep -q '^lib:libinih' "$hide" && grep -q '^lib:libcmocka' "$hide" && grep -qE '^lib:lib(dnnl|openblas)' "$hide" &&
  ok "hides Open MPI, libinih, cmocka and the BLAS" || bad "the hide list lacks one of Open MPI, libinih, cmocka, the BLAS"

# The script run inside the namespace: /usr/lib/x86_64-linux-gnu and /usr/bin
# become overlays whose top layer whites the hidden entries out (they stay
# where they are, so gcc still finds its cc1).
cat >"$WORK/inside.sh" <<'SH'
set -u
hide=$1 work=$2 src=$3
mount --make-rprivate / || exit 90
cover() { # cover DIR TAG: DIR less the hide list's TAG entries
  local wh=$work/wh-$2 n
  mkdir -p "$wh"
  for n in $(grep "^$2:" "$hide" | cut -d: -f2-); do mknod "$wh/$n" c 0 0 || exit 91; done
  mount -t overlay overlay -o "lowerdir=$wh:$1" "$1" || exit 92
}
cover /usr/lib/x86_64-linux-gnu lib
cover /usr/bin bin
for d in /usr/share/openmpi /etc/openmpi /usr/lib/x86_64-linux-gnu/pmix2; do
  [ -d "$d" ] && mount -t tmpfs none "$d"
done
mkdir -p /tmp/vgpu-gpu && mount -t tmpfs none /tmp/vgpu-gpu || exit 94
cd "$src" && exec bash "$work/steps.sh"
SH

# The steps, as the GPU machine runs them (its environment from env.sh).
cat >"$WORK/steps.sh" <<SH
set -u
echo "hidden: mpirun: \$(command -v mpirun || echo none); ssh: \$(command -v ssh || echo none); xz: \$(command -v xz || echo none)"
echo "hidden: libmpi.so.40 \$([ -e /usr/lib/x86_64-linux-gnu/libmpi.so.40 ] && echo present || echo absent); ldd vgpu_train before: \$(ldd '$VGPU_BUILD_DIR/vgpu_train' | grep -c 'not found') not found"
source scripts/gpu/env.sh
gpu_env_unpack '$bundle' '$VGPU_SOURCE_DIR' || { echo "UNPACK FAILED"; exit 1; }
gpu_env_use
export OMPI_MCA_plm_rsh_agent=false OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "build: \$GPU_BUILD"
echo "mpirun: \$(command -v mpirun)"
mpirun --version | head -1
missing=\$(for f in "\$GPU_BUILD"/vgpu_train "\$GPU_BUILD"/vgpurun "\$GPU_BUILD"/vgpu_allreduce_perf "\$GPU_BUILD"/test_device_cpu \
             "\$GPU_RT"/usr/bin/orterun "\$GPU_RT"/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/*.so; do ldd "\$f" | grep 'not found'; done | sort -u)
echo "ldd not found after: \${missing:-none}"
echo "=== vgpu_allreduce_perf np=2"
timeout 60 scripts/mpirun.sh -np 2 "\$GPU_BUILD"/vgpu_allreduce_perf -b 64K -e 4M -n 5 -w 1 2>&1 | tail -4
echo "=== vgpu_train np=2 synthetic"
timeout 60 scripts/mpirun.sh -np 2 "\$GPU_BUILD"/vgpu_train configs/synthetic_small.ini --set train.max_steps=40 2>&1 | tail -2
echo "=== vgpurun np=2"
timeout 60 "\$GPU_BUILD"/vgpurun -np 2 -- "\$GPU_BUILD"/vgpu_train configs/synthetic_small.ini --quiet --set train.max_steps=20 2>&1 | tail -1
if [ -d "\$GPU_DATA" ]; then
  echo "=== vgpu_train np=2 Fashion-MNIST from the bundle"
  timeout 90 scripts/mpirun.sh -np 2 "\$GPU_BUILD"/vgpu_train configs/default.ini --quiet --set "data.path=\$GPU_DATA" --set train.max_steps=100 2>&1 | tail -1
fi
echo "=== ctest -L gpu"
(cd "\$GPU_BUILD" && timeout 120 ctest -L '^gpu\$' 2>&1 | grep -E 'tests passed|Skipped|Failed|Not Run|No tests')
echo "=== check.sh --dry-run --quick"
timeout 240 scripts/gpu/check.sh '$WORK/check' --dry-run --quick --bundle '$bundle' 2>&1 | sed -n '/^vgpu GPU check/,\$p'
echo "check.sh exit \${PIPESTATUS[0]}"
SH

run "the bundle, its packages hidden" 290 unshare -m bash "$WORK/inside.sh" "$hide" "$WORK" "$VGPU_SOURCE_DIR"
echo "$out"
expect_rc 0
expect_out '^hidden: mpirun: none; ssh: none; xz: none$'
expect_out '^hidden: libmpi.so.40 absent; ldd vgpu_train before: [1-9][0-9]* not found$'
expect_out '^mpirun: /tmp/vgpu-gpu/rt/usr/bin/mpirun$'
expect_out '^mpirun \(Open MPI\) 4\.'
expect_out '^ldd not found after: none$'
expect_out '^OK$'                                     # vgpu_allreduce_perf
expect_out 'vgpu_train: done ranks=2 .*data=synthetic .*status=ok'
expect_out 'vgpu_train: done ranks=2 .*steps=20 .*status=ok' # vgpurun
if [ "$quick_bundle" = 0 ]; then
  expect_out '^build: /tmp/vgpu-gpu/build$'
  expect_out 'vgpu_train: done ranks=2 .*data=fashion-mnist .*status=ok'
fi
expect_out '100% tests passed|tests passed'
expect_out '^check.sh exit 0$'
expect_no_out 'FAIL|UNPACK FAILED|error while loading shared libraries|plm_rsh_agent'
finish
