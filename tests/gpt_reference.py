#!/usr/bin/env python3
"""gpt_reference.py: the PyTorch reference for vgpu_train's GPT (model.type = gpt, issue 46).

A GPT-2-style byte-level transformer written out op by op, so that every
convention the C model must match is on this page: the flat parameter layout
(layout()), the forward pass (forward()), the loss, AdamW and the clipping.
The C tests run it (Debian's python3-torch: /usr/bin/python3) and compare:

  init       a parameter file from a seed (GPT-2's initialisation)
  step       loss, gradients, gradient norm and the parameters after one step
  train      N steps over given batches, or over a text's sequences in
             order (--text: as vgpu_train makes them, with train.shuffle =
             false); training and validation losses

Files are raw little-endian arrays: parameters float32 in layout() order,
each tensor row-major; tokens int32. Everything runs in float32 on the CPU,
deterministically; `step --check-fd K` also checks the gradient file it
wrote against central finite differences in float64.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

V = 256          # vocabulary: bytes
LN_EPS = 1e-5    # every LayerNorm's epsilon (PyTorch's default)
INIT_STD = 0.02  # GPT-2's initialisation


def layout(L, C, T):
    """[(name, shape)] in the flat file's order: the C model's order too."""
    out = [("wte", (V, C)), ("wpe", (T, C))]
    for l in range(L):
        p = f"h{l}."
        out += [(p + "ln1.weight", (C,)), (p + "ln1.bias", (C,)),
                (p + "attn.qkv.weight", (3 * C, C)), (p + "attn.qkv.bias", (3 * C,)),
                (p + "attn.proj.weight", (C, C)), (p + "attn.proj.bias", (C,)),
                (p + "ln2.weight", (C,)), (p + "ln2.bias", (C,)),
                (p + "mlp.fc.weight", (4 * C, C)), (p + "mlp.fc.bias", (4 * C,)),
                (p + "mlp.proj.weight", (C, 4 * C)), (p + "mlp.proj.bias", (C,))]
    return out + [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]


def numel(shape):
    return math.prod(shape)


def unflatten(flat, lay):
    """Views of a flat tensor, one a layout entry, by name."""
    views, at = {}, 0
    for name, shape in lay:
        views[name] = flat[at:at + numel(shape)].view(shape)
        at += numel(shape)
    return views


def forward(P, tok, L, NH):
    """Logits [B, S, V] of tokens tok [B, S] (S <= T: wpe's first S rows)."""
    B, S = tok.shape
    C = P["wte"].shape[1]
    hs = C // NH
    x = P["wte"][tok] + P["wpe"][:S]
    causal = torch.ones(S, S, dtype=torch.bool).tril()  # position t sees 0..t
    for l in range(L):
        def w(n):
            return P[f"h{l}.{n}"]
        h = F.layer_norm(x, (C,), w("ln1.weight"), w("ln1.bias"), LN_EPS)
        qkv = F.linear(h, w("attn.qkv.weight"), w("attn.qkv.bias"))  # [B, S, 3C]
        # q, k, v are columns [0, C), [C, 2C), [2C, 3C); head j is columns
        # [j*hs, (j+1)*hs) of each: [B, S, C] -> [B, NH, S, hs].
        q, k, v = (t.reshape(B, S, NH, hs).transpose(1, 2) for t in qkv.split(C, dim=-1))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, S, C)  # heads back in column order
        x = x + F.linear(y, w("attn.proj.weight"), w("attn.proj.bias"))
        h = F.layer_norm(x, (C,), w("ln2.weight"), w("ln2.bias"), LN_EPS)
        u = F.gelu(F.linear(h, w("mlp.fc.weight"), w("mlp.fc.bias")), approximate="tanh")
        x = x + F.linear(u, w("mlp.proj.weight"), w("mlp.proj.bias"))
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], LN_EPS)
    return x @ P["wte"].t()  # tied output projection, no bias


def rows_loss(P, rows, L, NH, reduction="mean"):
    """Cross-entropy of rows [B, S+1]: inputs rows[:, :S], targets rows[:, 1:],
    the mean (or sum) over all B*S positions."""
    logits = forward(P, rows[:, :-1], L, NH)
    return F.cross_entropy(logits.reshape(-1, V), rows[:, 1:].reshape(-1), reduction=reduction)


# ---- files ----

def fail(msg):
    sys.exit(f"gpt_reference: {msg}")


def read_array(path, dtype, what):
    try:
        return np.fromfile(path, dtype=dtype)
    except OSError as e:
        fail(f"{path}: cannot read {what}: {e.strerror}")


def read_params(path, lay):
    """The flat float32 parameter file, checked against the layout's size."""
    flat = read_array(path, "<f4", "parameters")
    want = sum(numel(s) for _, s in lay)
    if flat.size * 4 != os.path.getsize(path) or flat.size != want:
        fail(f"{path}: {os.path.getsize(path)} bytes; the layout needs {want} float32s "
             f"({want * 4} bytes)")
    return torch.from_numpy(flat.astype(np.float32))


def read_rows(path, lead, context, what, width=None):
    """int32 rows of a file shaped lead + [W] (lead[0] may be -1: from the
    size), W = S + 1 taken from the size unless given (2 <= W <= context + 1)."""
    a = read_array(path, "<i4", what)
    shape = ", ".join(map(str, lead)).replace("-1", "M") + f", {width or 'W'}"
    if width is None:
        width = a.size // math.prod(lead)
    n = math.prod(lead) * width  # negative with lead[0] = -1: any number of rows
    if os.path.getsize(path) % 4 or width < 1 or a.size % width or (n > 0 and a.size != n):
        fail(f"{path}: {os.path.getsize(path)} bytes is not int32 [{shape}]")
    if not 2 <= width <= context + 1:
        fail(f"{path}: rows of {width} tokens; need 2..{context + 1} (context + 1)")
    if a.min() < 0 or a.max() >= V:
        fail(f"{path}: token ids must be in [0, {V})")
    return torch.from_numpy(a.astype(np.int64)).view(*lead, width)


# ---- text: vgpu_train's sequences (worker/dataset_text.c, dataset.c) ----

def read_text(path):
    """The bytes of a file, or of a directory's regular files (not links,
    not names ending .dat) in byte order of their names, concatenated."""
    try:
        if not os.path.isdir(path):
            with open(path, "rb") as f:
                return f.read()
        out, root = [], os.fsencode(path)
        for name in sorted(os.listdir(root)):
            full = os.path.join(root, name)
            if not name.endswith(b".dat") and os.path.isfile(full) and not os.path.islink(full):
                with open(full, "rb") as f:
                    out.append(f.read())
        return b"".join(out)
    except OSError as e:
        fail(f"{path}: cannot read the text: {e.strerror}")


def sequences(text, T):
    """Rows [M, T+1] of bytes: row i is text[i*T : i*T + T + 1] (inputs its
    first T, next-byte labels its last T), M = (len - 1) // T."""
    m = (len(text) - 1) // T
    a = np.frombuffer(text, dtype=np.uint8)
    idx = np.arange(m)[:, None] * T + np.arange(T + 1)[None, :]
    return torch.from_numpy(a[idx].astype(np.int64))


def split_text(text, T, val_fraction):
    """(training rows, validation rows) as dataset_split_text cuts them: the
    last val_fraction of the bytes (rounded down) validates; the training
    part ends one byte past its last whole sequence."""
    val_share = int(len(text) * val_fraction)
    train_share = len(text) - val_share
    cut = (train_share - 1) // T * T + 1 if train_share >= T + 1 else train_share
    if cut < T + 1 or len(text) - cut < T + 1:
        fail(f"{len(text)} bytes of text is too short for context {T}")
    return sequences(text[:cut], T), sequences(text[cut:], T)


def text_batches(rows, steps, B):
    """[steps, B, T+1]: batch s is rows [i*B, (i+1)*B), i = s modulo the
    epoch's whole batches (vgpu_train's train.shuffle = false, drop_last)."""
    per_epoch = rows.shape[0] // B
    if per_epoch < 1:
        fail(f"{rows.shape[0]} training rows hold no batch of {B}")
    return torch.stack([rows[(s % per_epoch) * B:(s % per_epoch + 1) * B] for s in range(steps)])


def schedule(a):
    """The learning rate of each step s = 0..N-1: a linear warm-up,
    lr * (s + 1) / W for s < W; then lr, or with --schedule cosine lr times
    (1 + cos(pi * (s - W) / (N - W))) / 2 (a LambdaLR of that factor)."""
    lrs = []
    for s in range(a.steps):
        if s < a.warmup_steps:
            lrs.append(a.lr * (s + 1) / a.warmup_steps)
        elif a.schedule == "cosine" and a.steps > a.warmup_steps:
            progress = min(1.0, (s - a.warmup_steps) / (a.steps - a.warmup_steps))
            lrs.append(a.lr * 0.5 * (1.0 + math.cos(math.pi * progress)))
        else:
            lrs.append(a.lr)
    return lrs


def write_floats(path, t):
    t.detach().to(torch.float32).numpy().astype("<f4").tofile(path)


def fmt(x):
    return format(float(x), ".9g")  # 9 significant digits: a float32 round-trips


def write_text(path, lines):
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))


# ---- the model's state: leaves, optimizer, one step ----

def leaves(flat, lay):
    """One float32 leaf tensor per layout entry (what clip_grad_norm_ and
    AdamW see, as a torch model's parameters would be)."""
    views = unflatten(flat, lay)
    return {name: views[name].clone().requires_grad_(True) for name, _ in lay}


def adamw(P, a):
    """torch.optim.AdamW, one parameter group: at step t, for every element,
    p *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
    p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps) (eps outside the
    square root, after the bias correction). foreach=False: the plain loop."""
    return torch.optim.AdamW(list(P.values()), lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                             weight_decay=a.weight_decay, foreach=False)


def flat_grads(P):
    return torch.cat([p.grad.reshape(-1) for p in P.values()])


def grad_norm(P):
    # clip_grad_norm_'s own formula: the 2-norm of the per-tensor 2-norms.
    return torch.norm(torch.stack([torch.norm(p.grad.detach(), 2) for p in P.values()]), 2)


def step(P, opt, rows, a, lr):
    """One training step; returns (loss, gradient before clipping, its norm)."""
    opt.zero_grad(set_to_none=False)
    loss = rows_loss(P, rows, a.layers, a.heads)
    loss.backward()
    grads = flat_grads(P).clone()
    if a.clip > 0:  # scales by clip / (norm + 1e-6) when the norm is over clip
        norm = torch.nn.utils.clip_grad_norm_(list(P.values()), a.clip)
    else:
        norm = grad_norm(P)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.step()
    return loss.item(), grads, norm.item()


def flat_params(P):
    return torch.cat([p.detach().reshape(-1) for p in P.values()])


# ---- modes ----

def init_params(L, C, T, seed):
    """GPT-2's initialisation as one flat tensor in layout order, drawn in
    that order from torch's default generator seeded with seed."""
    torch.manual_seed(seed)
    out = []
    for name, shape in layout(L, C, T):
        t = torch.zeros(shape)
        if name.endswith(("attn.proj.weight", "mlp.proj.weight")):
            t.normal_(0.0, INIT_STD / math.sqrt(2 * L))  # residual projections
        elif name.endswith(".weight") and name.split(".")[-2].startswith("ln"):
            t.fill_(1.0)  # LayerNorm gains (biases stay 0)
        elif len(shape) == 2:
            t.normal_(0.0, INIT_STD)  # embeddings and the other weights
        out.append(t.reshape(-1))
    return torch.cat(out)


def cmd_init(a):
    flat = init_params(a.layers, a.channels, a.context, a.seed)
    write_floats(a.out, flat)
    print(f"gpt_reference: wrote {a.out} ({flat.numel()} parameters)")


def fd_check(a, flat32, rows, grads_path, per_tensor):
    """Checks per_tensor entries of each tensor of the gradient file against
    central differences of the loss in float64; returns True when all agree."""
    lay = layout(a.layers, a.channels, a.context)
    got = read_array(grads_path, "<f4", "gradients")
    base = flat32.to(torch.float64)
    gen = torch.Generator().manual_seed(1234)
    h, worst, ok, at = 1e-6, 0.0, True, 0
    for name, shape in lay:
        for i in torch.randint(numel(shape), (per_tensor,), generator=gen).tolist():
            k = at + i
            diff = []
            for sign in (1.0, -1.0):
                p = base.clone()
                p[k] += sign * h
                with torch.no_grad():
                    diff.append(rows_loss(unflatten(p, lay), rows, a.layers, a.heads).item())
            fd = (diff[0] - diff[1]) / (2 * h)
            err = abs(float(got[k]) - fd)
            worst = max(worst, err)
            # float32 gradients against float64 differences: about 1e-7 apart
            # on the test's shape; gradients of attention's q and k start near
            # 1e-5, so a looser bound would miss the two blocks swapped.
            if err > 5e-7 + 1e-4 * abs(fd):
                ok = False
                print(f"fd-check: {name}[{i}] (flat {k}): file {got[k]:.9g}, fd {fd:.9g}")
        at += numel(shape)
    print(f"fd-check: {per_tensor * len(lay)} entries, max abs diff {worst:.3g}: "
          f"{'ok' if ok else 'MISMATCH'}")
    return ok


def cmd_step(a):
    lay = layout(a.layers, a.channels, a.context)
    flat = read_params(a.params, lay)
    rows = read_rows(a.tokens, (a.batch,), a.context, "tokens")
    P = leaves(flat, lay)
    opt = adamw(P, a)
    loss, grads, norm = step(P, opt, rows, a, a.lr)
    os.makedirs(a.out, exist_ok=True)
    write_text(os.path.join(a.out, "loss.txt"), [fmt(loss)])
    write_floats(os.path.join(a.out, "grads.bin"), grads)
    write_text(os.path.join(a.out, "grad_norm.txt"), [fmt(norm)])
    write_floats(os.path.join(a.out, "params_after.bin"), flat_params(P))
    print(f"step: loss={fmt(loss)} grad_norm={fmt(norm)} seq={rows.shape[1] - 1}")
    if a.check_fd > 0 and not fd_check(a, flat, rows, os.path.join(a.out, "grads.bin"), a.check_fd):
        sys.exit(1)


def evaluate(P, val, a):
    """Mean cross-entropy over every position of val [M, S+1], in nats: sums
    of chunks of --batch rows (float32), added up in float64."""
    total = 0.0
    with torch.no_grad():
        for r in range(0, val.shape[0], a.batch):
            total += rows_loss(P, val[r:r + a.batch], a.layers, a.heads, "sum").item()
    return total / (val.shape[0] * (val.shape[1] - 1))


def cmd_train(a):
    lay = layout(a.layers, a.channels, a.context)
    P = leaves(read_params(a.params, lay), lay)
    if a.text:
        rows, val = split_text(read_text(a.text), a.context, a.val_fraction)
        batches = text_batches(rows, a.steps, a.batch)
        print(f"text: {a.text}: {rows.shape[0]} training and {val.shape[0]} validation "
              f"sequences of {a.context}")
    else:
        batches = read_rows(a.batches, (a.steps, a.batch), a.context, "batches")
        # Validation rows have the batches' width.
        val = read_rows(a.val, (-1,), a.context, "validation rows", batches.shape[-1]) if a.val else None
    lrs = schedule(a)
    if a.lr_file:
        with open(a.lr_file) as f:
            lrs = [float(s) for s in f.read().split()]
        if len(lrs) != a.steps:
            fail(f"{a.lr_file}: {len(lrs)} learning rates for {a.steps} steps")
    opt = adamw(P, a)
    os.makedirs(a.out, exist_ok=True)
    train_lines, val_lines = [], []
    for s in range(a.steps):
        loss, _, norm = step(P, opt, batches[s], a, lrs[s])
        train_lines.append(fmt(loss))
        print(f"step={s + 1} loss={fmt(loss)} grad_norm={fmt(norm)} lr={fmt(lrs[s])}")
        last = s + 1 == a.steps
        if val is not None and (last or (a.eval_every > 0 and (s + 1) % a.eval_every == 0)):
            nats = evaluate(P, val, a)
            line = f"step={s + 1} val_loss={fmt(nats)} val_bpb={fmt(nats / math.log(2))}"
            val_lines.append(line)
            print(line)
    write_text(os.path.join(a.out, "train_loss.txt"), train_lines)
    write_text(os.path.join(a.out, "lr.txt"), [fmt(x) for x in lrs])
    if val is not None:
        write_text(os.path.join(a.out, "val.txt"), val_lines)
    write_floats(os.path.join(a.out, "params_after.bin"), flat_params(P))


# ---- the command line ----

def parse(argv):
    shape = argparse.ArgumentParser(add_help=False)
    g = shape.add_argument_group("model shape")
    g.add_argument("--layers", type=int, required=True, help="L, transformer blocks")
    g.add_argument("--heads", type=int, required=True, help="NH, attention heads (channels %% heads == 0)")
    g.add_argument("--channels", type=int, required=True, help="C, the embedding width")
    g.add_argument("--context", type=int, required=True, help="T, positions (wpe's rows)")
    g.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    opt = argparse.ArgumentParser(add_help=False)
    g = opt.add_argument_group("data and optimizer")
    g.add_argument("--params", required=True, help="flat float32 parameter file")
    g.add_argument("--batch", type=int, required=True, help="B, rows a batch")
    g.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
    g.add_argument("--beta1", type=float, default=0.9, help="AdamW beta1 (default 0.9)")
    g.add_argument("--beta2", type=float, default=0.999, help="AdamW beta2 (default 0.999)")
    g.add_argument("--eps", type=float, default=1e-8, help="AdamW epsilon (default 1e-8)")
    g.add_argument("--weight-decay", type=float, default=0.0,
                   help="decoupled weight decay, every parameter alike (default 0)")
    g.add_argument("--clip", type=float, default=0.0,
                   help="max global gradient norm (clip_grad_norm_); <= 0: none (default)")
    g.add_argument("--out", required=True, help="output directory")

    p = argparse.ArgumentParser(prog="gpt_reference.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Run `gpt_reference.py MODE --help` for a mode's options.")
    modes = p.add_subparsers(dest="mode", required=True, metavar="MODE")
    m = modes.add_parser("init", parents=[shape], help="write GPT-2-initialised parameters")
    m.add_argument("--seed", type=int, required=True, help="torch.manual_seed")
    m.add_argument("--out", required=True, help="the parameter file to write")
    m = modes.add_parser("step", parents=[shape, opt],
                         help="one step: loss, grads.bin, grad_norm, params_after.bin")
    m.add_argument("--tokens", required=True, help="int32 [B, S+1]: inputs [:, :S], targets [:, 1:]")
    m.add_argument("--check-fd", type=int, default=0, metavar="K",
                   help="check K entries of each tensor of grads.bin by float64 finite differences")
    m = modes.add_parser("train", parents=[shape, opt], help="N steps, training and validation loss")
    m.add_argument("--steps", type=int, required=True, help="N, steps (one batch each)")
    src = m.add_mutually_exclusive_group(required=True)
    src.add_argument("--batches", help="int32 [N, B, S+1]")
    src.add_argument("--text", metavar="PATH",
                     help="a text file or directory (as vgpu_train's data.path): its sequences "
                          "of --context bytes as vgpu_train makes them, batch s the rows "
                          "[s*B, (s+1)*B) (train.shuffle = false), the last --val-fraction "
                          "the validation rows")
    m.add_argument("--val-fraction", type=float, default=0.1,
                   help="with --text: data.val_fraction (default 0.1)")
    m.add_argument("--schedule", choices=["constant", "cosine"], default="constant",
                   help="after the warm-up: --lr, or a cosine decay (default constant)")
    m.add_argument("--warmup-steps", type=int, default=0, metavar="W",
                   help="linear warm-up: step s < W at lr*(s+1)/W (default 0)")
    m.add_argument("--lr-file", help="N learning rates, one a line (else --lr and --schedule)")
    m.add_argument("--val", help="int32 [M, S+1] validation rows, evaluated at the end")
    m.add_argument("--eval-every", type=int, default=0, help="also evaluate every this many steps")
    a = p.parse_args(argv)
    if min(a.layers, a.heads, a.channels, a.context) < 1 or a.channels % a.heads:
        p.error("need layers, heads, channels, context >= 1 and channels % heads == 0")
    if a.mode != "init" and (a.batch < 1 or (a.mode == "train" and a.steps < 1)):
        p.error("need --batch (and --steps) >= 1")
    if a.mode == "train" and (a.text and a.val or not 0 < a.val_fraction < 1 or a.warmup_steps < 0):
        p.error("--text makes its own validation rows (no --val); need 0 < --val-fraction < 1, "
                "--warmup-steps >= 0")
    return a


def main(argv):
    a = parse(argv)
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    {"init": cmd_init, "step": cmd_step, "train": cmd_train}[a.mode](a)


if __name__ == "__main__":
    main(sys.argv[1:])
