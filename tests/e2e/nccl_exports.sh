#!/usr/bin/env bash
# nccl_exports.sh HEADER LIBRARY: vgpu's libnccl.so.2 exports every function
# nccl.h declares, under its name and its profiling name (pnccl...), nothing
# else, and carries NCCL's SONAME; and, where a GPU run has recorded the
# list (docs/gpu-runs/torch_nccl_imports.txt), every nccl* symbol that
# PyTorch's libtorch_cuda.so imports.
source "$(dirname "$0")/lib.sh"
header=$1 lib=$2

# The header's functions: lines that start with a return type and name one.
declared=$(grep -E '^(ncclResult_t|const char\*|void)[[:space:]]' "$header" |
           grep -oE '\bnccl[A-Za-z0-9_]+[[:space:]]*\(' | tr -d ' (' | sort -u)
n=$(wc -w <<<"$declared")
if [ "$n" -ge 40 ]; then ok "nccl.h declares $n functions"; else out=$declared; bad "found only $n functions in $header"; fi
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwi]$/ { print $3 }' | sort -u)
missing=""
for f in $declared; do
  grep -qx "$f" <<<"$exported" || missing="$missing $f"
  grep -qx "p$f" <<<"$exported" || missing="$missing p$f"
done
if [ -z "$missing" ]; then ok "every function of nccl.h is exported, as ncclX and pncclX"
else out=$missing; bad "not exported:$missing"; fi
extra=$(comm -13 <(for f in $declared; do echo "$f"; echo "p$f"; done | sort) <(echo "$exported"))
if [ -z "$extra" ]; then ok "nothing else is exported"; else out=$extra; bad "exported beyond nccl.h: $(tr '\n' ' ' <<<"$extra")"; fi
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" = libnccl.so.2 ]; then ok "SONAME libnccl.so.2"; else out=$soname; bad "SONAME is '$soname'"; fi
needs=$(objdump -p "$lib" | awk '$1 == "NEEDED" { print $2 }' | tr '\n' ' ')
if grep -qE 'libmpi|libcuda|libnccl' <<<"$needs"; then out=$needs; bad "links what a NCCL program may not have: $needs"
else ok "needs neither MPI, CUDA nor NCCL ($needs)"; fi

imports="$VGPU_SOURCE_DIR/docs/gpu-runs/torch_nccl_imports.txt"
if [ -s "$imports" ]; then
  absent=$(comm -23 <(grep -oE '^nccl[A-Za-z0-9_]+' "$imports" | sort -u) <(echo "$exported"))
  if [ -z "$absent" ]; then ok "every nccl symbol PyTorch imports ($(grep -c . "$imports")) is exported"
  else out=$absent; bad "PyTorch imports what is not exported: $(tr '\n' ' ' <<<"$absent")"; fi
else
  echo "SKIPPED PART: PyTorch's import list is not recorded yet (the GPU check writes docs/gpu-runs/torch_nccl_imports.txt)"
fi
finish
