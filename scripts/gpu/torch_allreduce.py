#!/usr/bin/env python3
"""torch_allreduce.py: torch.distributed.all_reduce's time and bandwidth, for the GPU check.

  vgpurun -np 4 -- python3 scripts/gpu/torch_allreduce.py [nccl|gloo] [cuda|cpu]

Times all_reduce (sum, float32) of 1 MiB to 256 MiB on this rank's device
(cuda:0, the GPU its CUDA_VISIBLE_DEVICES names), checks every result (small
integers: exact in any order), and prints from rank 0 a line a size in
nccl-tests' units (busbw = algbw * 2(n-1)/n) and, from every rank, which
libnccl.so the process loaded (vgpu's where vgpurun put it first).
Exit 0 when every result is right.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_loaded import nccl_library  # noqa: E402


def say(line):
    os.write(1, (line + "\n").encode())


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "nccl"
    kind = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    dev = torch.device(kind, 0) if kind == "cuda" else torch.device("cpu")
    if kind == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    wrong = 0
    for mib in (1, 4, 16, 64, 256):
        n = mib * 1024 * 1024 // 4
        x = torch.full((n,), float(rank + 1), device=dev)
        for _ in range(3):  # warm-up
            dist.all_reduce(x)
        iters = 10
        dist.barrier()
        if kind == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            x.fill_(float(rank + 1))
            dist.all_reduce(x)
        if kind == "cuda":
            torch.cuda.synchronize()
        secs = (time.perf_counter() - t0) / iters
        want = world * (world + 1) / 2
        bad = int((x != want).sum().item())
        wrong += bad
        algbw = mib * 1024 * 1024 / secs / 1e9
        if rank == 0:
            say(f"torch_allreduce: {backend} {world} ranks {mib} MiB: {secs * 1e6:.0f} us, "
                f"algbw {algbw:.2f} GB/s, busbw {algbw * 2 * (world - 1) / world:.2f} GB/s, "
                f"#wrong {bad}")
    say(f"torch_allreduce: rank {rank} libnccl={nccl_library()} {'ok' if wrong == 0 else 'WRONG'}")
    dist.destroy_process_group()
    return 0 if wrong == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
