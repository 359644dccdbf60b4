#!/usr/bin/python3
"""bench_pytorch_ddp.py: the PyTorch reference for scripts/bench_train.sh.

PyTorch DistributedDataParallel (gloo, CPU) trains what configs/default.ini
trains, one epoch, and prints samples/s for each rank count: MLP 784-256-128-10
(ReLU, He-normal weights, zero biases), softmax cross-entropy, AdamW (lr 1e-3,
betas 0.9/0.999, eps 1e-8, weight decay 1e-4), 100 warm-up steps then cosine,
global batch 256 split into contiguous per-rank pieces, incomplete last batch
dropped, pixels scaled to [0, 1], one intra-op thread per rank. Like
vgpu_train, the clock covers the training steps only (not data loading,
process start, one warm-up forward/backward pass, or evaluation).

Needs Debian's python3-torch (apt-get install python3-torch); run it with
/usr/bin/python3. Usage:
    scripts/bench_pytorch_ddp.py [--nps 1,2,4] [--epochs 1] [--batch 256]
                                 [--data /usr/share/datasets/fashion-mnist]
"""
import argparse
import gzip
import math
import os
import socket
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def read_idx(path):
    """An IDX file (plain or .gz) as a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    _, dtype, ndim = struct.unpack(">HBB", data[:4])
    if dtype != 0x08:
        raise ValueError(f"{path}: only unsigned-byte IDX files are supported")
    shape = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def find(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    sys.exit(f"bench_pytorch_ddp: {stem}[.gz] not found in {data_dir} "
             "(apt-get install dataset-fashion-mnist)")


def load(data_dir, split):
    images = read_idx(find(data_dir, f"{split}-images-idx3-ubyte"))
    labels = read_idx(find(data_dir, f"{split}-labels-idx1-ubyte"))
    x = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 255.0)
    return x, torch.from_numpy(labels.astype(np.int64))


def make_model(dims, seed):
    torch.manual_seed(seed)
    layers = []
    for i in range(len(dims) - 1):
        lin = nn.Linear(dims[i], dims[i + 1])
        nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
        nn.init.zeros_(lin.bias)
        layers += [lin, nn.ReLU()] if i + 2 < len(dims) else [lin]
    return nn.Sequential(*layers)


def worker(rank, world, port, args, result):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    x, y = load(args.data, "train")
    xt, yt = load(args.data, "t10k")
    model = DDP(make_model([784, 256, 128, 10], args.seed))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=1e-4)
    steps_per_epoch = len(x) // args.batch  # drop_last
    total, warmup = args.epochs * steps_per_epoch, 100

    def lr_factor(step):  # vgpu's optim_lr_at: linear warm-up, then cosine to 0
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    loss_fn = nn.CrossEntropyLoss()
    # Contiguous per-rank pieces of every global batch, as vgpu's sampler.
    lo, hi = args.batch * rank // world, args.batch * (rank + 1) // world
    gen = torch.Generator().manual_seed(args.seed)
    # Warm-up as vgpu_train does: one forward/backward (and gradient
    # all-reduce) with the step's shapes before the clock starts; no update.
    loss_fn(model(x[:hi - lo]), y[:hi - lo]).backward()
    opt.zero_grad(set_to_none=True)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        perm = torch.randperm(len(x), generator=gen)
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch + lo:s * args.batch + hi]
            opt.zero_grad(set_to_none=True)
            # Mean over this rank's piece; DDP averages over ranks: the mean
            # over the global batch (equal pieces).
            loss_fn(model(x[idx]), y[idx]).backward()
            opt.step()
            sched.step()
    dist.barrier()
    seconds = time.perf_counter() - t0
    with torch.no_grad():
        acc = (model(xt).argmax(1) == yt).float().mean().item()
    if rank == 0:
        result.put((args.epochs * steps_per_epoch * args.batch / seconds, acc, seconds))
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nps", default="1,2,4", help="rank counts (default 1,2,4)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=256, help="global batch (default 256)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()
    nps = [int(n) for n in args.nps.split(",")]
    print(f"# bench_pytorch_ddp: torch {torch.__version__}, gloo, 1 thread per rank, "
          f"global batch {args.batch}, {args.epochs} epoch(s), MLP 784-256-128-10, AdamW")
    print(f"{'np':>4} {'samples_per_s':>14} {'vs_np1':>12} {'test_acc':>10}")
    ctx = mp.get_context("spawn")
    base = None
    for np_ in nps:
        result = ctx.SimpleQueue()
        mp.start_processes(worker, args=(np_, free_port(), args, result), nprocs=np_,
                           join=True, start_method="spawn")
        sps, acc, _ = result.get()
        base = base or sps
        print(f"{np_:>4} {sps:>14.0f} {sps / base:>11.2f}x {acc:>10.4f}", flush=True)


if __name__ == "__main__":
    main()
