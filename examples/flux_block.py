"""A Flux.1 double block and single block on the mxfp6 ops, beside the same blocks in plain
PyTorch: outputs, loss and every gradient against a float64 run of the plain blocks, and the step
time (forward + backward) of ours, eager PyTorch and torch.compile of the plain blocks, in one run.

    python3 examples/flux_block.py --db var/kernels.db           # embedded: no server
    python3 examples/flux_block.py --server 127.0.0.1:50051

The blocks follow Flux.1 (black-forest-labs/flux, model.py and layers.py): AdaLN modulation,
QKV projection, per-head RMSNorm of Q and K with learned scales, interleaved RoPE, attention over
the text and image tokens together, gated residuals, a GELU (tanh) MLP. Ours replaces
LayerNorm-modulate with mxfp6.ln_modulate (per sample) and RMSNorm+RoPE with mxfp6.norm_rope on
the projection's output (blocked layout: Flux's "B L (K H D)"); the GEMMs, attention and MLP are
PyTorch's, in bf16, in both. Same parameters, same inputs.

Accuracy is judged against float64: each of ours' outputs and gradients must be within 1.5 times
the error of the plain bf16 blocks (relative L2 norm), plus 1e-3 — no worse than PyTorch's own bf16.
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
import mxfp6  # noqa: E402

HEAD_DIM = 128


class TorchOps:
    """The plain PyTorch of the two fused steps, as Flux writes them."""

    @staticmethod
    def ln_modulate(x, scale, shift, tokens_per_sample):
        B = scale.shape[0]
        xs = F.layer_norm(x.view(B, tokens_per_sample, -1), (x.shape[-1],), eps=1e-6)
        return ((1 + scale[:, None]) * xs + shift[:, None]).view(x.shape)

    @staticmethod
    def norm_rope(mixed_qkv, q_scale, k_scale, cos, sin, heads):
        T = mixed_qkv.shape[0]
        q, k, v = mixed_qkv.view(T, 3, heads, HEAD_DIM).unbind(1)

        def rms(x, w):  # Flux's RMSNorm: rstd in fp32, back to the input dtype, times the scale
            xf = x.float()
            return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * w

        def rope(x):  # Flux's apply_rope: pairs (2i, 2i+1) rotated in fp32
            L = cos.shape[0]
            c = cos.repeat(T // L, 1)[:, None].to(torch.promote_types(x.dtype, torch.float32))
            s = sin.repeat(T // L, 1)[:, None].to(c.dtype)
            x0, x1 = x.to(c.dtype)[..., 0::2], x.to(c.dtype)[..., 1::2]
            return torch.stack((c * x0 - s * x1, s * x0 + c * x1), -1).flatten(-2).type_as(x)

        return rope(rms(q, q_scale)), rope(rms(k, k_scale)), v


class Mxfp6Ops:
    @staticmethod
    def ln_modulate(x, scale, shift, tokens_per_sample):
        return mxfp6.ln_modulate(x, scale, shift, tokens_per_sample=tokens_per_sample)

    @staticmethod
    def norm_rope(mixed_qkv, q_scale, k_scale, cos, sin, heads):
        return mxfp6.norm_rope(mixed_qkv, q_scale, k_scale, cos, sin, layout="blocked")


def attention(q, k, v, B, L):
    """q, k, v [B*L, H, 128] -> [B*L, H*128]."""
    def heads(x):
        return x.view(B, L, -1, HEAD_DIM).transpose(1, 2)
    o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v))
    return o.transpose(1, 2).reshape(B * L, -1)


def join(txt, img, B):
    """[B*Lt, ...] and [B*Li, ...] -> [B*(Lt+Li), ...], text first within each sample."""
    return torch.cat((txt.view(B, -1, *txt.shape[1:]), img.view(B, -1, *img.shape[1:])), 1).flatten(0, 1)


class DoubleBlock(nn.Module):
    def __init__(self, hidden, heads, mlp_ratio=4.0):
        super().__init__()
        self.hidden, self.heads, mlp = hidden, heads, int(hidden * mlp_ratio)
        for s in ("img", "txt"):
            setattr(self, f"{s}_mod", nn.Linear(hidden, 6 * hidden))
            setattr(self, f"{s}_qkv", nn.Linear(hidden, 3 * hidden))
            setattr(self, f"{s}_q_scale", nn.Parameter(torch.ones(HEAD_DIM)))
            setattr(self, f"{s}_k_scale", nn.Parameter(torch.ones(HEAD_DIM)))
            setattr(self, f"{s}_proj", nn.Linear(hidden, hidden))
            setattr(self, f"{s}_mlp", nn.Sequential(nn.Linear(hidden, mlp), nn.GELU(approximate="tanh"),
                                                    nn.Linear(mlp, hidden)))

    def forward(self, ops, img, txt, vec, rope_img, rope_txt):
        B, Li, Lt = vec.shape[0], img.shape[0] // vec.shape[0], txt.shape[0] // vec.shape[0]
        parts, qkv = {}, []
        for s, x, L, (cos, sin) in (("txt", txt, Lt, rope_txt), ("img", img, Li, rope_img)):
            mod = getattr(self, f"{s}_mod")(F.silu(vec)).chunk(6, dim=-1)
            parts[s] = mod
            h = ops.ln_modulate(x, mod[1].contiguous(), mod[0].contiguous(), L)
            mixed = getattr(self, f"{s}_qkv")(h)
            qkv.append(ops.norm_rope(mixed, getattr(self, f"{s}_q_scale"), getattr(self, f"{s}_k_scale"), cos, sin,
                                     self.heads))
        q, k, v = (join(t, i, B) for t, i in zip(*qkv))
        a = attention(q, k, v, B, Lt + Li).view(B, Lt + Li, -1)
        out = {}
        for s, x, sl in (("txt", txt, slice(0, Lt)), ("img", img, slice(Lt, Lt + Li))):
            mod, L = parts[s], x.shape[0] // B
            x = x + (mod[2][:, None] * getattr(self, f"{s}_proj")(a[:, sl]).view(B, L, -1)).flatten(0, 1)
            h = ops.ln_modulate(x, mod[4].contiguous(), mod[3].contiguous(), L)
            out[s] = x + (mod[5][:, None] * getattr(self, f"{s}_mlp")(h).view(B, L, -1)).flatten(0, 1)
        return out["img"], out["txt"]


class SingleBlock(nn.Module):
    def __init__(self, hidden, heads, mlp_ratio=4.0):
        super().__init__()
        self.hidden, self.heads, self.mlp = hidden, heads, int(hidden * mlp_ratio)
        self.mod = nn.Linear(hidden, 3 * hidden)
        self.linear1 = nn.Linear(hidden, 3 * hidden + self.mlp)
        self.linear2 = nn.Linear(hidden + self.mlp, hidden)
        self.q_scale, self.k_scale = nn.Parameter(torch.ones(HEAD_DIM)), nn.Parameter(torch.ones(HEAD_DIM))

    def forward(self, ops, x, vec, rope):
        B, L = vec.shape[0], x.shape[0] // vec.shape[0]
        shift, scale, gate = self.mod(F.silu(vec)).chunk(3, dim=-1)
        h = self.linear1(ops.ln_modulate(x, scale.contiguous(), shift.contiguous(), L))
        mixed, mlp = h[:, :3 * self.hidden], h[:, 3 * self.hidden:]  # mixed: token stride 3*hidden + mlp
        q, k, v = ops.norm_rope(mixed, self.q_scale, self.k_scale, rope[0], rope[1], self.heads)
        a = attention(q, k, v, B, L)
        out = self.linear2(torch.cat((a, F.gelu(mlp, approximate="tanh")), 1))
        return x + (gate[:, None] * out.view(B, L, -1)).flatten(0, 1)


class Model(nn.Module):
    """One double block then one single block over the joined tokens."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.double_block, self.single_block = DoubleBlock(hidden, heads), SingleBlock(hidden, heads)

    def forward(self, ops, img, txt, vec, rope_img, rope_txt):
        img, txt = self.double_block(ops, img, txt, vec, rope_img, rope_txt)
        B = vec.shape[0]
        x = join(txt, img, B)
        rope = (torch.cat((rope_txt[0], rope_img[0])), torch.cat((rope_txt[1], rope_img[1])))
        return self.single_block(ops, x, vec, rope)


def inputs(B, Li, Lt, hidden, dtype, seed=0):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)

    def r(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device="cuda") * scale).to(dtype)

    def table(L):  # a rotary table per position: angles of Flux's EmbedND kind (theta 10000)
        pos = torch.arange(L, device="cuda", dtype=torch.float64)[:, None]
        freqs = 10000.0 ** (-torch.arange(64, device="cuda", dtype=torch.float64) / 64)
        angle = pos * freqs
        return torch.cos(angle).float(), torch.sin(angle).float()

    return dict(img=r(B * Li, hidden), txt=r(B * Lt, hidden), vec=r(B, hidden), rope_img=table(Li),
                rope_txt=table(Lt)), r(B * (Li + Lt), hidden)


def run(model, ops, x, u):
    """Forward, loss <u, out>, backward; returns the loss, output and every gradient by name."""
    leaves = {k: v.detach().clone().requires_grad_() for k, v in x.items() if k in ("img", "txt", "vec")}
    args = dict(x, **leaves)
    for p in model.parameters():
        p.grad = None
    out = model(ops, **args)
    wide = torch.promote_types(out.dtype, torch.float32)
    loss = (out.to(wide) * u.to(wide)).sum()
    loss.backward()
    grads = {f"d{k}": v.grad for k, v in leaves.items()}
    grads.update({f"d{n}": p.grad for n, p in model.named_parameters()})
    return loss.detach(), out.detach(), grads


def relative(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp(min=1e-30)).item()


def step_ms(fn, steps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="a kernel database (embedded, no server)")
    where.add_argument("--server", help="HOST:PORT[,HOST:PORT...] of mxfp6-server")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--img-tokens", type=int, default=256)
    ap.add_argument("--txt-tokens", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=3072)
    ap.add_argument("--heads", type=int, default=24)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    mxfp6.connect(f"sqlite://{os.path.abspath(args.db)}" if args.db else f"grpc://{args.server}")

    torch.manual_seed(0)
    model = Model(args.hidden, args.heads).cuda()
    with torch.no_grad():  # scales near 1, as trained; biases non-zero
        for n, p in model.named_parameters():
            if n.endswith("_scale"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
    bf16 = Model(args.hidden, args.heads).cuda().to(torch.bfloat16)
    bf16.load_state_dict(model.state_dict())
    f64 = Model(args.hidden, args.heads).cuda().double()
    f64.load_state_dict(model.state_dict())

    x16, u16 = inputs(args.batch, args.img_tokens, args.txt_tokens, args.hidden, torch.bfloat16)
    x64 = {k: (v.double() if torch.is_tensor(v) else tuple(t.double() for t in v)) for k, v in x16.items()}
    truth = run(f64, TorchOps, x64, u16.double())
    ours = run(bf16, Mxfp6Ops, x16, u16)
    plain = run(bf16, TorchOps, x16, u16)

    rows, failures = [], []
    named = [("loss", ours[0], plain[0], truth[0]), ("output", ours[1], plain[1], truth[1])]
    named += [(n, ours[2][n], plain[2][n], truth[2][n]) for n in truth[2]]
    for name, o, p, t in named:
        eo, ep = relative(o, t), relative(p, t)
        ok = eo <= 1.5 * ep + 1e-3
        rows.append({"tensor": name, "ours": eo, "pytorch_bf16": ep, "ok": ok})
        if not ok:
            failures.append(name)
    print(f"{'tensor':34s} {'ours':>10s} {'pytorch bf16':>13s}   (relative L2 error against float64)")
    for r in rows:
        print(f"{r['tensor']:34s} {r['ours']:10.2e} {r['pytorch_bf16']:13.2e}   {'ok' if r['ok'] else 'WORSE'}")

    compiled = torch.compile(bf16)
    timings = {
        "ours (eager)": step_ms(lambda: run(bf16, Mxfp6Ops, x16, u16), args.steps),
        "pytorch eager": step_ms(lambda: run(bf16, TorchOps, x16, u16), args.steps),
        "torch.compile of pytorch": step_ms(lambda: run(compiled, TorchOps, x16, u16), args.steps),
        "torch.compile of ours": step_ms(lambda: run(compiled, Mxfp6Ops, x16, u16), args.steps),
    }
    print(f"\nstep (forward + backward), median of {args.steps}, B={args.batch}, "
          f"{args.img_tokens}+{args.txt_tokens} tokens, {torch.cuda.get_device_name()}:")
    for k, v in timings.items():
        print(f"  {k:28s} {v:8.3f} ms")
    stats = mxfp6.stats()
    print(f"mxfp6: {stats['launches']} launches, ops by rule {stats['rules']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "args": vars(args),
                       "accuracy": rows, "step_ms": timings, "rules": stats["rules"]}, f, indent=1)
    if failures:
        print("worse than PyTorch's bf16:", ", ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
