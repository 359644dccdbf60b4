#!/usr/bin/env bash
# ddp.sh: an unmodified PyTorch DDP program (tests/e2e/ddp_check.py; Debian's
# python3-torch, gloo on CPU) under vgpurun: env:// rendezvous from the
# variables vgpurun gives each rank; a gloo all-reduce and two DDP steps agree
# across ranks and with one process. Skipped (said) without PyTorch.
source "$(dirname "$0")/lib.sh"
/usr/bin/python3 -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null ||
  skip "PyTorch with gloo not found (apt-get install python3-torch)"
run "vgpurun -np 2 -- python3 ddp_check.py" 180 env OMP_NUM_THREADS=1 "$VGPU_BUILD_DIR/vgpurun" \
  -np 2 -- /usr/bin/python3 "$VGPU_SOURCE_DIR/tests/e2e/ddp_check.py"
expect_rc 0
for r in 0 1; do
  expect_out "^ddp_check: rank $r of 2 \(local $r\): all_reduce=3 replicas_equal=True matches_single_process=True ok\$"
done
finish
