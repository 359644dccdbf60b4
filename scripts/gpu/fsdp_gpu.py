#!/usr/bin/env python3
"""fsdp_gpu.py: a few FSDP steps through the job's NCCL, for the GPU check.

  vgpurun -np 4 -- python3 scripts/gpu/fsdp_gpu.py [nccl|gloo]

FSDP (FullyShardedDataParallel) shards a small model's parameters over the
ranks, so each step all-gathers them and reduce-scatters the gradients (NCCL's
ncclAllGather and ncclReduceScatter). Three SGD steps on each rank's quarter
of a batch must leave the same parameters as one process training on the
whole batch (rtol 1e-5). Prints one line a rank with the libnccl.so it loaded.
Exit 0 when it holds.
"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_loaded import nccl_library  # noqa: E402
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def say(line):
    os.write(1, (line + "\n").encode())


def model_and_data(dev):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                          nn.Linear(64, 8)).to(dev)
    x = torch.randn(64, 32, device=dev)
    y = torch.randn(64, 8, device=dev)
    return model, x, y


def train(model, x, y, steps=3):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "nccl"
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    rank = int(os.environ.get("RANK", "0"))
    step = "init_process_group"
    try:
        dist.init_process_group(backend, init_method="env://")
        world = dist.get_world_size()
        step = "FSDP"
        model, x, y = model_and_data(dev)
        ref, _, _ = model_and_data(dev)
        per = x.shape[0] // world
        shard = slice(per * rank, per * (rank + 1))
        fsdp = FSDP(model, device_id=dev)
        train(fsdp, x[shard], y[shard])
        train(ref, x, y)
        with FSDP.summon_full_params(fsdp):
            flat = torch.cat([p.detach().flatten() for p in fsdp.parameters()])
        ref_flat = torch.cat([p.detach().flatten() for p in ref.parameters()])
        close = torch.allclose(flat, ref_flat, rtol=1e-5, atol=1e-6)
        worst = (flat - ref_flat).abs().max().item()
        lib = nccl_library()
        say(f"fsdp_gpu: {backend} rank {rank} of {world}: matches_single_process={close} "
            f"max_abs_diff={worst:.3g} libnccl={lib} {'ok' if close else 'FAILED'}")
        dist.destroy_process_group()
        return 0 if close else 1
    except Exception as e:  # the message a user would get, verbatim
        text = " | ".join(str(e).strip().splitlines()) or "(no message)"
        say(f"fsdp_gpu: {backend} rank {rank}: {step} failed: {type(e).__name__}: {text}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
