#!/usr/bin/python3
"""bench_gpt_ddp.py: the PyTorch side of scripts/bench_gpt.sh.

PyTorch DistributedDataParallel (gloo, CPU, one intra-op thread a rank)
trains vgpu_train's byte-level GPT: the model of tests/gpt_reference.py (the
reference the C model is tested against, its parameters as one module's
leaves), from its GPT-2 initialisation, on a text's sequences as vgpu_train
makes them, in file order; each global batch split into contiguous per-rank
pieces; AdamW, linear warm-up then cosine, gradient clipping by the global
norm (clip_grad_norm_), as configs/gpt_tiny.ini sets them. As vgpu_train,
the clock covers the training steps only: not start-up, data, one warm-up
forward and backward pass with its all-reduce, or evaluation.

It starts its --np ranks itself (torch.multiprocessing, spawn; gloo on
127.0.0.1), or runs as one rank of a launcher's (RANK, WORLD_SIZE and
MASTER_ADDR set: torchrun's). Debian 12's torchrun (torch 1.13 on Python
3.11) fails before starting any rank (its Std flag parsing returns None for
"0"), hence the spawn. Needs python3-torch; run with /usr/bin/python3:
    scripts/bench_gpt_ddp.py --np 2 --steps 50 [shape and optimizer options]
Rank 0 prints one line:
    ddp np=N steps=S batch=B context=T tokens_per_s=X seconds=Y loss=Z
"""
import argparse
import math
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import gpt_reference as ref  # noqa: E402  (the model, its layout and init, the text's rows)


class GPT(nn.Module):
    """gpt_reference's functional model as a module: one leaf a layout entry."""

    def __init__(self, flat, lay, layers, heads):
        super().__init__()
        self.names = [name for name, _ in lay]
        views = ref.unflatten(flat, lay)
        self.leaves = nn.ParameterList([nn.Parameter(views[n].clone()) for n in self.names])
        self.layers, self.heads = layers, heads

    def forward(self, rows):
        return ref.rows_loss(dict(zip(self.names, self.leaves)), rows, self.layers, self.heads)


def rank_main(rank, world, port, a):
    """One rank: port None when a launcher set the rendezvous up."""
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float32)
    if port is not None:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    lay = ref.layout(a.layers, a.channels, a.context)
    flat = ref.init_params(a.layers, a.channels, a.context, a.seed)
    model = DDP(GPT(flat, lay, a.layers, a.heads))
    rows, _ = ref.split_text(ref.read_text(a.text), a.context, a.val_fraction)
    batches = ref.text_batches(rows, a.steps, a.batch)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                            weight_decay=a.weight_decay)

    def lr_factor(step):  # vgpu's optim_lr_at: linear warm-up, then cosine
        if step < a.warmup_steps:
            return (step + 1) / a.warmup_steps
        span = a.steps - a.warmup_steps
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - a.warmup_steps) / span))) if span > 0 else 1.0

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_factor)
    # Contiguous per-rank pieces of every global batch, as vgpu's sampler.
    lo, hi = a.batch * rank // world, a.batch * (rank + 1) // world
    # Warm-up as vgpu_train's: one forward and backward (the all-reduce
    # with it) on the step's shapes before the clock starts; no update.
    model(batches[0, lo:hi]).backward()
    opt.zero_grad(set_to_none=True)
    dist.barrier()
    t0 = time.perf_counter()
    for s in range(a.steps):
        opt.zero_grad(set_to_none=True)
        # The mean over this rank's piece; DDP averages the ranks' gradients:
        # the global batch's mean (equal pieces).
        loss = model(batches[s, lo:hi])
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        sched.step()
    dist.barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        tokens = a.steps * a.batch * a.context
        print(f"ddp np={world} steps={a.steps} batch={a.batch} context={a.context} "
              f"tokens_per_s={tokens / seconds:.1f} seconds={seconds:.3f} loss={loss.item():.4f}",
              flush=True)
    dist.destroy_process_group()


def parse(argv):
    p = argparse.ArgumentParser(prog="bench_gpt_ddp.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--channels", type=int, default=64)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=32, help="global batch, sequences (default 32)")
    p.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--warmup-steps", type=int, default=30)
    p.add_argument("--clip", type=float, default=1.0, help="<= 0: no clipping")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--text", default="/usr/share/games/fortunes",
                   help="text file or directory (default Debian's fortunes)")
    p.add_argument("--val-fraction", type=float, default=0.1)
    p.add_argument("--np", type=int, default=1, help="ranks to start (default 1)")
    a = p.parse_args(argv)
    if min(a.layers, a.heads, a.channels, a.context, a.batch, a.steps, a.np) < 1 or a.channels % a.heads:
        p.error("need positive sizes and channels % heads == 0")
    return a


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv):
    a = parse(argv)
    if "RANK" in os.environ and "MASTER_ADDR" in os.environ:  # a launcher's rank
        rank_main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), None, a)
    else:
        mp.start_processes(rank_main, args=(a.np, free_port(), a), nprocs=a.np, join=True,
                           start_method="spawn")


if __name__ == "__main__":
    main(sys.argv[1:])
