#!/usr/bin/env python3
"""ddp_check.py: an unmodified-style PyTorch DDP program, as vgpurun runs it.

It knows nothing of vgpu: torch.distributed's env:// rendezvous reads RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which vgpurun gives every rank. Checks
(gloo on CPU): an all-reduce of rank + 1 sums to n(n+1)/2 on every rank, and
two DDP steps of a small model, each rank on its own data, leave the same
parameters on every rank, equal to one process training on the whole batch.
Prints one line per rank; exit 0 when every check holds, 1 otherwise.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def model_and_data(world, dev="cpu"):
    """The model and the whole batch, the same on every rank (scripts/gpu/ddp_gpu.py
    takes them onto a GPU)."""
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)).to(dev)
    g = torch.Generator().manual_seed(11)
    x = torch.randn(4 * world, 8, generator=g).to(dev)
    y = torch.randint(0, 3, (4 * world,), generator=g).to(dev)
    return model, x, y


def train(model, x, y, steps=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()


def main():
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ["LOCAL_RANK"])
    ok = world == int(os.environ["WORLD_SIZE"]) and rank == int(os.environ["RANK"])

    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    ok &= t.item() == world * (world + 1) / 2

    model, x, y = model_and_data(world)
    ref, _, _ = model_and_data(world)
    shard = slice(4 * rank, 4 * rank + 4)
    train(DDP(model), x[shard], y[shard])
    train(ref, x, y)  # one process, the whole batch: what DDP must equal
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    same = all(torch.equal(everyone[0], e) for e in everyone)
    ref_flat = torch.cat([p.detach().flatten() for p in ref.parameters()])
    close = torch.allclose(flat, ref_flat, rtol=1e-5, atol=1e-6)
    ok &= same and close
    # One write of the whole line: the ranks' lines reach mpirun's output
    # whole, whatever buffering Python's stdout has (PYTHONUNBUFFERED writes
    # the text and its newline apart, and another rank's line can come between).
    os.write(1, (f"ddp_check: rank {rank} of {world} (local {local}): all_reduce={t.item():g} "
                 f"replicas_equal={same} matches_single_process={close} "
                 f"{'ok' if ok else 'FAILED'}\n").encode())
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
