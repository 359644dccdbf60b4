#!/usr/bin/env python3
"""ddp_gpu.py: tests/e2e/ddp_check.py's checks on CUDA tensors, for the GPU check.

  vgpurun -np 4 -- python3 scripts/gpu/ddp_gpu.py gloo|nccl

An unmodified-style PyTorch DDP program: env:// rendezvous from the variables
vgpurun gives each rank, every rank on the one GPU its CUDA_VISIBLE_DEVICES
names (cuda:0). Checks: an all-reduce of rank + 1 on a CUDA tensor sums to
n(n+1)/2; two DDP steps of a small model on CUDA leave the same parameters on
every rank, equal to one process training on the whole batch. Prints one line
a rank; when the backend refuses (NCCL with ranks sharing a GPU), the line
carries the exception's exact text, so the user's message is on record.
Exit 0 when every check holds, 1 otherwise.
"""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_loaded import nccl_library  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP

# The model, data and training of the CPU check, on this rank's GPU.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "e2e"))
from ddp_check import model_and_data, train  # noqa: E402


def say(line):
    os.write(1, (line + "\n").encode())  # one write: whole lines under mpirun


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "gloo"
    rank = int(os.environ.get("RANK", "0"))
    where = (f"rank {rank} CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')} "
             f"devices={torch.cuda.device_count()}")
    dev = torch.device("cuda", 0)
    step = "init_process_group"
    try:
        torch.cuda.set_device(dev)
        kwargs = {"device_id": dev} if backend == "nccl" else {}
        dist.init_process_group(backend, init_method="env://", **kwargs)
        world = dist.get_world_size()
        step = "all_reduce"
        t = torch.tensor([float(rank + 1)], device=dev)
        dist.all_reduce(t)
        ok = t.item() == world * (world + 1) / 2
        step = "DDP"
        model, x, y = model_and_data(world, dev)
        ref, _, _ = model_and_data(world, dev)
        shard = slice(4 * rank, 4 * rank + 4)
        train(DDP(model, device_ids=[0]), x[shard], y[shard])
        train(ref, x, y)
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        everyone = [torch.empty_like(flat) for _ in range(world)]
        step = "all_gather"
        dist.all_gather(everyone, flat)
        same = all(torch.equal(everyone[0], e) for e in everyone)
        ref_flat = torch.cat([p.detach().flatten() for p in ref.parameters()])
        close = torch.allclose(flat, ref_flat, rtol=1e-5, atol=1e-6)
        ok &= same and close
        torch.cuda.synchronize()
        lib = nccl_library()
        say(f"ddp_gpu: {backend} rank {rank} of {world} ({where}): all_reduce={t.item():g} "
            f"replicas_equal={same} matches_single_process={close} libnccl={lib} "
            f"{'ok' if ok else 'FAILED'}")
        dist.destroy_process_group()
        return 0 if ok else 1
    except Exception as e:  # the message a user would get, verbatim
        text = " | ".join(str(e).strip().splitlines()) or "(no message)"
        say(f"ddp_gpu: {backend} rank {rank} ({where}): {step} failed: {type(e).__name__}: {text}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
