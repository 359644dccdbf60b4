#!/usr/bin/env bash
# bundle.sh: prepares, on this Debian 12 machine, everything the GPU machine
# lacks (docs/gpu-runs/README.md), into gpu-bundle/ (git-ignored; the device
# tool carries it: carry ["gpu-bundle"]):
#   runtime.tar.xz     Open MPI's runtime (openmpi-bin, libopenmpi3,
#                      openmpi-common) and every library that ldd names for it
#                      and for vgpu's programs (PMIx, hwloc, libevent, libfabric,
#                      libinih, cmocka, oneDNN or OpenBLAS, zlib, ...), fetched
#                      with apt-get download and unpacked with dpkg -x into a
#                      folder, pruned of documentation
#   vgpu-build.tar.xz  vgpu built here for the H100/H200 (CUDA arch 90, NCCL
#                      loaded at run time) in GPU_ROOT/build with the source at
#                      GPU_ROOT/src, GPU_ROOT being the fixed path where
#                      check.sh unpacks it (CMake's test files and RPATHs hold
#                      absolute paths); check.sh's all-reduce and cap steps run
#                      its vgpu_allreduce_perf and test_api_cap
#   fashion-mnist/     the dataset configs/default.ini trains on
#   MANIFEST.txt       what is in it: packages and versions, the git commit,
#                      the build's configuration, sizes
#   tree.sha256        the sums of the tree's files it was made from
# Prints the bundle's size; fails when it is over VGPU_BUNDLE_MAX_MIB (50).
# Options:
#   --no-build        reuse GPU_ROOT/build as it is
#   -j N              build jobs (default 2)
#   --from-build DIR  no build tree in the bundle: it goes with the build in DIR
#                     as it stands (the rehearsal's quick bundle of the ctest
#                     build, tests/e2e/gpu_bundle.sh); MANIFEST.txt names DIR
#   --out DIR         write the bundle there (default gpu-bundle/)
#   --no-data         leave Fashion-MNIST out
#   --fast            xz -1 instead of -6 (larger, quicker)
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)
source scripts/gpu/env.sh

out=${VGPU_BUNDLE_DIR:-$repo/gpu-bundle}
stage=${VGPU_BUNDLE_STAGE:-/tmp/vgpu-bundle-stage}
max_mib=${VGPU_BUNDLE_MAX_MIB:-50}
jobs=2 build=1 from="" data=1 level=-6
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) build=0 ;;
    -j) jobs=${2:?}; shift ;;
    --from-build) from=$(cd "${2:?}" && pwd); build=0; shift ;;
    --out) out=${2:?}; shift ;;
    --no-data) data=0 ;;
    --fast) level=-1 ;;
    -h|--help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bundle.sh: unknown argument '$1' (bundle.sh --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$from" ] && [ -z "${VGPU_BUNDLE_STAGE:-}" ]; then # a stage of its own, gone at exit
  stage=$(mktemp -d /tmp/vgpu-bundle-stage.XXXXXX)
  trap 'rm -rf "$stage"' EXIT
fi
bdir=${from:-$GPU_ROOT/build}
t_start=$SECONDS
say() { echo "bundle.sh: [$((SECONDS - t_start))s] $*"; }

# ---- vgpu, built for the GPU machine at its fixed path ----
# GPU_ROOT/src is this repository; the build sees it through the link, so
# every path it records is GPU_ROOT/src/... and GPU_ROOT/build/..., which
# check.sh recreates there.
if [ "$build" = 1 ]; then
  if [ -e "$GPU_ROOT/src" ] && [ ! -L "$GPU_ROOT/src" ]; then
    echo "bundle.sh: $GPU_ROOT/src exists and is not a link; set VGPU_GPU_ROOT elsewhere" >&2; exit 1
  fi
  mkdir -p "$GPU_ROOT/build"
  ln -sfn "$repo" "$GPU_ROOT/src"
  say "configuring vgpu in $GPU_ROOT/build (CUDA arch 90, NCCL at run time)"
  if ! cmake -S "$GPU_ROOT/src" -B "$GPU_ROOT/build" -DCMAKE_BUILD_TYPE=Release \
       -DVGPU_CUDA=ON -DVGPU_NCCL=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$GPU_ROOT/build/configure.log" 2>&1; then
    cat "$GPU_ROOT/build/configure.log" >&2; exit 1
  fi
  sed -n '/vgpu .* configuration/,/^-- $/p' "$GPU_ROOT/build/configure.log"
  say "building (-j$jobs; log $GPU_ROOT/build/build.log)"
  if ! cmake --build "$GPU_ROOT/build" -j"$jobs" >"$GPU_ROOT/build/build.log" 2>&1; then
    grep -E -A5 'error|Error' "$GPU_ROOT/build/build.log" | head -40 >&2
    echo "bundle.sh: build failed; full log in $GPU_ROOT/build/build.log" >&2; exit 1
  fi
fi
for p in vgpu_train vgpu_allreduce_perf test_api_cap; do
  [ -x "$bdir/$p" ] || { echo "bundle.sh: no $bdir/$p" >&2; exit 1; }
done
if [ -z "$from" ]; then
  grep -q 'CMAKE_CUDA_ARCHITECTURES:[A-Z]*=90$' "$bdir/CMakeCache.txt" ||
    { echo "bundle.sh: $bdir is not a CUDA arch 90 build" >&2; exit 1; }
fi

# ---- the Debian runtime: packages, then what ldd names, until closed ----
# Libraries every image has (glibc's, libmvec among them, and the C++ runtime): never
# carried (carrying libmvec would make its package, libc6, one of the bundle's).
base_re='^(libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|ld-linux-x86-64|libstdc\+\+|libgcc_s|linux-vdso)\.so'
rm -rf "$stage"
mkdir -p "$stage/debs" "$stage/root"
declare -A want=()
for p in openmpi-bin libopenmpi3 openmpi-common libinih1 libcmocka0 zlib1g; do want[$p]=1; done
# The BLAS this build links (CMakeLists.txt: VGPU_CPU_BLAS, AUTO = oneDNN when installed).
blas=$(ldd "$bdir/vgpu_train" | grep -oE 'lib(dnnl|openblas|blis)[^ ]*' | head -1 || true)
say "the build's BLAS: ${blas:-none found by ldd}"
declare -A fetched=() seen=()
unresolved=""
# pkg_of PATH: the Debian package owning a library, from one index of dpkg's
# file lists (merged /usr: paths compared without a leading /usr); nothing
# for a file no package owns (the CUDA toolkit's under /usr/local).
declare -A owner=()
while read -r p path; do
  owner[${path#/usr}]=$p
done < <(grep -H '\.so' /var/lib/dpkg/info/*.list | sed -E 's|^/var/lib/dpkg/info/([^:/]+)(:[a-z0-9]+)?\.list:|\1 |')
pkg_of() {
  local f=$1 q
  for q in "$f" "$(readlink -f "$f")"; do
    q=${q#/usr}
    [ -n "${owner[$q]:-}" ] && { echo "${owner[$q]}"; return; }
  done
  return 0 # none: an empty answer, not a failure that set -e would end the script on
}
declare -A scanned=()
round=0
while :; do
  round=$((round + 1))
  todo=()
  for p in "${!want[@]}"; do
    [ -n "${fetched[$p]:-}" ] && continue
    # The installed version (what the build linked), else the candidate.
    ver=$(dpkg-query -W -f '${Version}' "$p" 2>/dev/null || true)
    todo+=("$p${ver:+=$ver}")
    fetched[$p]=1
  done
  [ "${#todo[@]}" -gt 0 ] || break
  if ! (cd "$stage/debs" && apt-get download -q "${todo[@]}" >/dev/null 2>&1); then
    for p in "${todo[@]}"; do # one by one: which one, and its candidate version instead
      (cd "$stage/debs" && { apt-get download -q "$p" >/dev/null 2>&1 || apt-get download -q "${p%%=*}" >/dev/null 2>&1; }) ||
        { echo "bundle.sh: apt-get download ${p%%=*} failed" >&2; exit 1; }
    done
  fi
  rm -rf "$stage/root" && mkdir -p "$stage/root"
  for d in "$stage"/debs/*.deb; do dpkg -x "$d" "$stage/root"; done
  # Every ELF file of the runtime and of vgpu's build, with the runtime's
  # folders first on the path: what resolves outside them must come along.
  r=$stage/root
  lp=$r/usr/lib/x86_64-linux-gnu:$r/lib/x86_64-linux-gnu:$r/usr/lib/x86_64-linux-gnu/openmpi/lib:$r/usr/lib/x86_64-linux-gnu/pmix2/lib
  # (each file once: a later round reads only what its packages added)
  elves=()
  while IFS= read -r -d '' f; do
    [ -n "${scanned[$f]:-}" ] && continue
    scanned[$f]=1
    IFS= read -r -n4 magic <"$f" 2>/dev/null && [ "$magic" = $'\x7fELF' ] && elves+=("$f")
  done < <(find "$r" "$bdir" -type f \( -perm -u+x -o -name '*.so*' \) -not -path '*/CMakeFiles/*' -print0)
  while read -r lib path; do
    [[ $lib =~ $base_re ]] && continue
    [ -n "${seen[$lib]:-}" ] && continue
    seen[$lib]=1
    case $path in "$r"/*|"$bdir"/*) continue ;; esac
    if [ "$path" = "not found" ]; then
      case " $unresolved " in *" $lib "*) ;; *) unresolved="$unresolved $lib" ;; esac
      continue
    fi
    p=$(pkg_of "$path")
    if [ -z "$p" ]; then
      case " $unresolved " in *" $lib "*) ;; *) unresolved="$unresolved $lib($path)" ;; esac
      continue
    fi
    [ -n "${want[$p]:-}" ] || { want[$p]=1; say "round $round: $lib -> $p"; }
  done < <([ "${#elves[@]}" = 0 ] || printf '%s\0' "${elves[@]}" | LD_LIBRARY_PATH=$lp xargs -0 ldd 2>/dev/null |
           awk '$2 == "=>" { print $1, ($3 == "not" ? "not found" : $3) }' | sort -u)
done
[ -z "$unresolved" ] || say "not carried (not installed here, or no package owns it):$unresolved"

# Prune what a run does not read; give the launcher the names the
# alternatives system would (dpkg -x runs no maintainer scripts).
r=$stage/root
rm -rf "$r"/usr/share/doc "$r"/usr/share/man "$r"/usr/share/lintian "$r"/usr/share/bug \
       "$r"/usr/include "$r"/usr/lib/x86_64-linux-gnu/pkgconfig
find "$r" -name '*.a' -delete
for n in mpirun mpiexec; do ln -sfn orterun "$r/usr/bin/$n"; done
# Absolute links would point into the host's /: make them relative.
while read -r l; do
  t=$(readlink "$l")
  ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$r$t")" "$l"
done < <(find "$r" -type l -lname '/*')

mkdir -p "$out"
rm -rf "$out"/*.tar.xz "$out/fashion-mnist" "$out/MANIFEST.txt"
say "compressing the runtime ($(du -sh "$r" | cut -f1) unpacked)"
tar -C "$r" -cf - . | xz -T2 "$level" >"$out/runtime.tar.xz"
if [ -z "$from" ]; then
  # The build tree, less objects and static archives.
  say "compressing the build tree"
  tar -C "$bdir" --exclude='*.o' --exclude='*.a' --exclude='CMakeFiles' --exclude='build.log' \
      --exclude='Testing' --exclude='vgpu-flight' -cf - . | xz -T2 "$level" >"$out/vgpu-build.tar.xz"
fi

# ---- Fashion-MNIST (Debian's dataset-fashion-mnist) ----
if [ "$data" = 1 ]; then
  src_data=/usr/share/datasets/fashion-mnist
  mkdir -p "$out/fashion-mnist"
  if [ ! -f "$src_data/train-images-idx3-ubyte.gz" ]; then
    (cd "$stage" && apt-get download -q dataset-fashion-mnist >/dev/null 2>&1) &&
      dpkg -x "$stage"/dataset-fashion-mnist_*.deb "$stage/data" && src_data=$stage/data/usr/share/datasets/fashion-mnist
  fi
  cp "$src_data"/*-ubyte.gz "$out/fashion-mnist/"
fi

# ---- the manifest ----
{
  echo "vgpu GPU bundle, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release; echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{ print $NF }'))"
  echo "git: $(git rev-parse HEAD) $(git diff --quiet HEAD -- . ':!gpu-bundle' 2>/dev/null && echo clean || echo 'with uncommitted changes')"
  echo "GPU_ROOT: $GPU_ROOT (scripts/gpu/check.sh unpacks it there)"
  [ -z "$from" ] || echo "build_at: $from"
  echo "build: $(sed -n 's/^--   CUDA *: //p' "$bdir/configure.log" 2>/dev/null | head -1)"
  echo "       NCCL $(sed -n 's/^--   NCCL *: //p' "$bdir/configure.log" 2>/dev/null | head -1); BLAS $blas"
  echo "packages ($(ls "$stage"/debs/*.deb | wc -l), $(du -cb "$stage"/debs/*.deb | tail -1 | cut -f1) bytes as .deb):"
  for d in "$stage"/debs/*.deb; do dpkg-deb --show --showformat='  ${Package} ${Version}\n' "$d"; done | sort
  echo "files:"
  (cd "$out" && du -b ./*.tar.xz $([ "$data" = 1 ] && echo fashion-mnist/*) | sed 's/^/  /')
} >"$out/MANIFEST.txt"
cat "$out/MANIFEST.txt"
# The tree the bundle goes with, file by file: the GPU machine gets no .git,
# so check.sh compares these sums to tell a bundle of another tree.
(git ls-files -z; git ls-files -z --others --exclude-standard) | grep -zv '^gpu-bundle/' |
  xargs -0 sha256sum 2>/dev/null >"$out/tree.sha256" || true

# ---- the size: the bundle beside the tree that travels with it ----
bundle_b=$(du -sb "$out" | cut -f1)
tree_b=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
printf 'bundle.sh: bundle %s: %.1f MiB (%d packages); tree that travels with it %.1f MiB; together %.1f MiB of 64 (%ds)\n' \
  "$out" "$(awk -v b="$bundle_b" 'BEGIN { print b / 1048576 }')" "${#fetched[@]}" \
  "$(awk -v b="$tree_b" 'BEGIN { print b / 1048576 }')" "$(awk -v b="$bundle_b" -v t="$tree_b" 'BEGIN { print (b + t) / 1048576 }')" \
  $((SECONDS - t_start))
if [ "$bundle_b" -gt $((max_mib * 1048576)) ]; then
  echo "bundle.sh: the bundle is over $max_mib MiB" >&2; exit 1
fi
