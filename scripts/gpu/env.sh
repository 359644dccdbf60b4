# env.sh: the environment that runs vgpu from an unpacked GPU bundle (sourced
# by check.sh and the bundle's rehearsal, tests/e2e/gpu_bundle.sh).
#
#   source scripts/gpu/env.sh; gpu_env_unpack BUNDLE_DIR; gpu_env_use
#
# The bundle (scripts/gpu/bundle.sh) holds Debian 12's Open MPI runtime and
# the libraries vgpu links (libinih, cmocka, the BLAS, ...) as one unpacked
# root (runtime.tar.xz), vgpu's build tree built for GPU_ROOT/build with the
# source at GPU_ROOT/src (vgpu-build.tar.xz), and Fashion-MNIST. Everything
# is unpacked under GPU_ROOT, never into /: a fixed path, since CMake's test
# files and the build's RPATHs hold absolute paths; the source tree is
# wherever the repository lies (GPU_ROOT/src is a link to it). A bundle made
# with bundle.sh --from-build has no build tree: its MANIFEST.txt names the
# build it goes with (build_at), which must be where it says.

GPU_ROOT=${VGPU_GPU_ROOT:-/tmp/vgpu-gpu}
GPU_RT=$GPU_ROOT/rt        # the Debian runtime root (usr/bin/orterun, usr/lib/...)
GPU_DATA=$GPU_ROOT/fashion-mnist
GPU_BUILD=$GPU_ROOT/build  # vgpu's build tree (gpu_env_use reads GPU_ROOT/build_at)
# Libraries of the bundle's own that stay in use even where the host has a
# library of the same name: Open MPI's and what it was built against (a host's
# other Open MPI would not match the bundle's launcher and components).
GPU_KEEP_RE='^lib(mpi|open-|mca_|ompi|oshmem|pmix|hwloc|event|fabric|uc[pstm]|psm|infinipath|inih|INIReader|cmocka|dnnl|openblas|blis)'

# gpu_untar_ FILE DIR: tar -xJ, or Python's tarfile where xz is missing.
gpu_untar_() {
  if command -v xz >/dev/null; then
    tar -xJf "$1" -C "$2"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$1" "$2"
  fi
}

# gpu_env_unpack BUNDLE_DIR [SOURCE_DIR]: unpacks the bundle under GPU_ROOT
# (replacing an earlier unpack, never a build made there) and links
# GPU_ROOT/src to SOURCE_DIR (default: this repository). A library the host
# already has (ldconfig -p names it and the file is there: zlib, libgomp, ...)
# is moved aside to GPU_RT/shadowed, unless GPU_KEEP_RE names it, so that the
# host's own, perhaps newer, copy serves every process, Python's included.
# Prints what it did; returns non-zero when something is missing.
gpu_env_unpack() {
  local bundle=$1 src=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)} f soname build_at
  [ -f "$bundle/runtime.tar.xz" ] || { echo "gpu_env_unpack: $bundle/runtime.tar.xz is missing (run scripts/gpu/bundle.sh)"; return 1; }
  mkdir -p "$GPU_ROOT" || return 1
  if [ -d "$GPU_ROOT/build/CMakeFiles" ] && [ ! -e "$GPU_ROOT/build/.unpacked" ]; then
    echo "gpu_env_unpack: $GPU_ROOT/build is a build made here (bundle.sh's), not an unpacked one: not replacing it" \
         "(unpack elsewhere: VGPU_GPU_ROOT, or in a mount namespace as tests/e2e/gpu_bundle.sh does)"
    return 1
  fi
  rm -rf "$GPU_RT" "$GPU_DATA" "$GPU_ROOT/build_at" || return 1
  mkdir -p "$GPU_RT" || return 1
  ln -sfn "$src" "$GPU_ROOT/src" || return 1
  gpu_untar_ "$bundle/runtime.tar.xz" "$GPU_RT" || return 1
  if [ -f "$bundle/vgpu-build.tar.xz" ]; then
    rm -rf "$GPU_ROOT/build" && mkdir -p "$GPU_ROOT/build" || return 1
    gpu_untar_ "$bundle/vgpu-build.tar.xz" "$GPU_ROOT/build" || return 1
    touch "$GPU_ROOT/build/.unpacked"
    build_at=$GPU_ROOT/build
  else
    build_at=$(sed -n 's/^build_at: //p' "$bundle/MANIFEST.txt" 2>/dev/null)
    [ -x "$build_at/vgpu_train" ] || { echo "gpu_env_unpack: no vgpu-build.tar.xz and no build at '$build_at'"; return 1; }
  fi
  echo "$build_at" >"$GPU_ROOT/build_at"
  if [ -d "$bundle/fashion-mnist" ]; then cp -r "$bundle/fashion-mnist" "$GPU_DATA" || return 1; fi
  mkdir -p "$GPU_RT/shadowed"
  local cache
  cache=$(ldconfig -p 2>/dev/null | awk '/x86-64/ && $NF ~ /^\// { print $1, $NF }')
  for f in "$GPU_RT"/usr/lib/x86_64-linux-gnu/lib*.so.* "$GPU_RT"/lib/x86_64-linux-gnu/lib*.so.*; do
    [ -L "$f" ] || [ -f "$f" ] || continue
    soname=$(basename "$f")
    [[ $soname =~ $GPU_KEEP_RE ]] && continue
    # The soname (libz.so.1) is what the loader looks up: moved aside, it is
    # the host's; the versioned file it names stays, never asked for.
    while read -r name path; do
      if [ "$name" = "$soname" ] && [ -f "$path" ]; then
        mv "$f" "$GPU_RT/shadowed/" && echo "gpu_env_unpack: the host has $soname ($path): using the host's"
        break
      fi
    done <<<"$cache"
  done
  echo "gpu_env_unpack: unpacked $bundle into $GPU_ROOT ($(du -sh "$GPU_ROOT/" 2>/dev/null | cut -f1)); build $build_at"
}

# gpu_env_use: exports what runs the bundle's Open MPI and vgpu's programs,
# and sets GPU_BUILD. The NCCL of PyTorch's wheel (nvidia-nccl-cu13, not on
# the loader's path) is added when python3 has it; GPU_NCCL_DIR says where
# (empty: none); GPU_CUBLAS_DIR likewise for cuBLAS, when the loader has none.
gpu_env_use() {
  GPU_BUILD=$(cat "$GPU_ROOT/build_at" 2>/dev/null || echo "$GPU_ROOT/build")
  export OPAL_PREFIX=$GPU_RT/usr
  # PMIx (Open MPI's process manager, Debian's libpmix2) finds its components
  # and help files under its own prefix.
  export PMIX_INSTALL_PREFIX=$GPU_RT/usr/lib/x86_64-linux-gnu/pmix2
  # The H100 image has another PMIx in the compiled-in path: each mpirun
  # warns that its pcompress_zlib fails to load ("undefined symbol"), and
  # goes on without compression (harmless for one host). Pointing
  # PMIX_MCA_mca_base_component_path at ours did not stop it (2026-11-26).
  export PATH=$GPU_RT/usr/bin:$PATH
  local libs=$GPU_RT/usr/lib/x86_64-linux-gnu:$GPU_RT/lib/x86_64-linux-gnu
  libs=$libs:$GPU_RT/usr/lib/x86_64-linux-gnu/openmpi/lib:$GPU_RT/usr/lib/x86_64-linux-gnu/pmix2/lib
  GPU_NCCL_DIR=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$GPU_NCCL_DIR" ] && [ -e "$GPU_NCCL_DIR/libnccl.so.2" ]; then libs=$libs:$GPU_NCCL_DIR; else GPU_NCCL_DIR=""; fi
  # cuBLAS (libcublas.so.13, loaded when first used): the loader's own if it
  # has one, else the toolkit's folder or PyTorch's wheel (nvidia/cu13/lib).
  GPU_CUBLAS_DIR=""
  if ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.13 '; then
    local d
    for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
             $(python3 -c 'import nvidia, os; [print(os.path.join(p, n, "lib")) for p in nvidia.__path__ for n in sorted(os.listdir(p))]' 2>/dev/null); do
      if [ -e "$d/libcublas.so.13" ]; then GPU_CUBLAS_DIR=$d; libs=$libs:$d; break; fi
    done
  fi
  export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export GPU_NCCL_DIR GPU_CUBLAS_DIR GPU_BUILD
}
