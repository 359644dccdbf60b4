#!/usr/bin/env bash
# gpu_check.sh: scripts/gpu/check.sh --dry-run, so that the GPU check (issue
# 30, docs/gpu-runs/README.md) keeps working between GPU runs: every step
# runs on CPU devices or the simulated driver (VGPU_SIM_GPUS) where it can and
# passes; every step that needs a GPU says SKIP(dry-run: ...); the logs are
# at most 8 files (what the device tool brings back) and the table comes last.
source "$(dirname "$0")/lib.sh"
run "check.sh --dry-run" 380 "$VGPU_SOURCE_DIR/scripts/gpu/check.sh" "$WORK/out" --dry-run --build "$VGPU_BUILD_DIR"
table=$(sed -n '/^vgpu GPU check/,$p' <<<"$out")
echo "$table"
expect_rc 0
expect_out '^0 failed, [0-9]+ steps; logs in '
expect_out '^vgpu GPU check \(dry run, no GPU\): [0-9a-f]{40}'
for step in 'mpirun' 'train np=4 \(headline\)' 'train np=1' 'train np=4 CPU' 'cap overrun' \
            'allreduce ring np=2' 'allreduce staging np=2' 'allreduce ring np=4' 'allreduce staging np=4' \
            'allreduce cpu np=2' 'determinism np=1,2,4' 'kill -9 a rank' 'vnccl example np=4' \
            'vnccl perf np=4' 'devcoll np=4 auto' 'devcoll np=4 oneshot' 'devcoll np=4 twoshot' \
            'devcoll np=2 auto' 'devcoll comm np=4' 'devcoll train np=1,2,4' 'devcoll kill'; do
  expect_out "^$step +PASS "
done
for step in 'gpu facts' 'ctest -L gpu' 'allreduce nccl np=1' 'memcheck np=2' 'racecheck ring' \
            'ddp gloo np=4' 'ddp nccl np=4' 'torch all_reduce nccl np=4' 'fsdp nccl np=4' 'device probe' \
            'probe: UUID twice' "probe: torch's NCCL" 'devcoll np=4 time-sliced' 'synccheck devcoll'; do
  expect_out "^$step +SKIP\(dry-run: needs a GPU"
done
# The all-reduce rows ran vgpu_allreduce_perf on the simulated GPU, beside its copy rate.
expect_out '^allreduce ring np=4 +PASS +4 MiB: busbw [0-9.]+ GB/s \(in place [0-9.]+\), [0-9.]+ us; d2d copy [0-9.]+ GB/s; #wrong 0; 4 ranks on 1 host\(s\), device cuda, 1 physical device\(s\) \(simulated GPUs\), backend ring'
expect_out '^allreduce cpu np=2 +PASS +CPU devices \(devices.kind=cpu\): Avg bus bandwidth'
# The device collectives' rows ran their protocol (simulated: VGPU_DEVCOLL=1),
# each forced algorithm alone, automatic both; the killed rank was named.
expect_out '^devcoll np=4 auto +PASS +8 B [0-9.]+ us; 8192 B [0-9.]+ us; device one-shot,device two-shot; d2d copy [0-9.]+ GB/s; #wrong 0$'
expect_out '^devcoll np=4 oneshot +PASS .*; device one-shot; d2d'
expect_out '^devcoll np=4 twoshot +PASS .*; device two-shot; d2d'
expect_out '^devcoll comm np=4 +PASS +backend ring, 4 ranks, device collectives.*: OK \(0 failed checks\)$'
expect_out '^devcoll kill +PASS +ended [0-9.]+ s after kill -9 of rank 1, named; /dev/shm clean$'
# vgpu's NCCL on the simulated GPU: the example exact, vgpu_nccl_perf's 4 MiB row.
expect_out '^vnccl perf np=4 +PASS +4 MiB [0-9.]+ us busbw [0-9.]+ GB/s; #wrong 0; staged$'
# The headline job really ran: the README's accuracy, 1 simulated GPU -> 4 virtual.
expect_out '^train np=4 \(headline\) +PASS +acc 0\.(89|9)'
if grep -q 'vgpu: 1 simulated physical GPU -> 4 virtual GPUs (4 ranks, 1 host)' "$WORK/out/train.log"; then
  ok "train.log has the job table: 1 simulated physical GPU -> 4 virtual GPUs"
else bad "train.log lacks the job table"; fi
n=$(ls "$WORK/out" | wc -l)
if [ "$n" -le 8 ]; then ok "$n files in OUTDIR (at most 8)"; else bad "$n files in OUTDIR: $(ls "$WORK/out")"; fi
if [ "$(tail -1 <<<"$table" | cut -c1-9)" = "0 failed," ]; then ok "the table is last"; else bad "the output does not end with the table"; fi
finish
