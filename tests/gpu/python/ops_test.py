"""The mxfp6 Python ops on a GPU: every op forward and backward against fp64 references, a
finite-difference check of each backward against its own forward, and the same calls under
torch.compile (fullgraph, no recompiles across steps) and CUDA-graph capture, bit for bit equal to
eager.

usage: PYTHONPATH=python python3 tests/gpu/python/ops_test.py --db DB [--json OUT]

DB: a kernel database holding the families of tests/gpu/python/families.json (`mxfp6c precompile
--shapes tests/gpu/python/families.json --targets sm_90 --db DB`); every key resolves to its op's
default plan. Needs torch >= 2.4 with CUDA. Exit status 0 when every check holds.

References (independent of the kernels): the formulas of docs/architecture.md 4.1 and 4.2 in
float64, their gradients by torch.autograd; the packers against bench/problems.py's tensor
transcription of docs/mxfp6-format.md (itself checked against the spec's exact-arithmetic
transcription, bench/mxfp6_spec.py), bit for bit.

Bounds: a bf16 result within 1 bf16 ulp of the fp64 reference plus 2^-16 of the tensor's largest
|reference| (the tuner's Bf16 bound: fp32 arithmetic, one rounding to bf16); the finite
difference of <w, op(x)> along a random direction, w the sign of the outputs' change, within 1 %
of the backward's directional derivative <grad(w), dx>; packed blobs bit-exact, and the
packer prologue's (packed from fp32 values, not from the bf16 gradient) at most 1 byte in 1000
different from packing its bf16 gradient.
"""

import argparse
import json
import os
import sys
import time
import warnings

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import mxfp6  # noqa: E402
import problems  # noqa: E402  (the packers' torch reference)

F64, BF16, F32 = torch.float64, torch.bfloat16, torch.float32
DEV = "cuda"
RESULTS = []
FAILURES = []


def record(case, check, value, bound, ok, note=""):
    RESULTS.append({"case": case, "check": check, "value": value, "bound": bound, "ok": bool(ok), "note": note})
    print(f"{'ok  ' if ok else 'FAIL'} {case:46s} {check:34s} {value:>12.4g} (bound {bound:g}) {note}", flush=True)
    if not ok:
        FAILURES.append(f"{case}: {check} = {value} (bound {bound}) {note}")


def bf16_ulp(ref):
    """One bf16 ulp of each |ref| (of the smallest normal at 0)."""
    a = ref.abs().clamp(min=2.0 ** -126)
    return torch.exp2(torch.floor(torch.log2(a)) - 7)


def within_bf16(case, name, out, ref, ulps=1, what="vs fp64"):
    """max |out - ref| / (ulps ulp + 2^-16 max|ref|): <= 1 passes. Two kernels' results, each
    within the bound of the truth, are compared with ulps=2."""
    ref = ref.to(F64)
    err = (out.to(F64) - ref).abs()
    bound = ulps * bf16_ulp(ref) + ref.abs().max() * 2.0 ** -16
    ratio = (err / bound).max().item()
    record(case, f"{name} {what}", ratio, 1.0, ratio <= 1.0, f"max error / ({ulps} ulp + 2^-16 max)")


def same_bits(case, name, a, b):
    differ = (a.view(torch.uint8) != b.view(torch.uint8)).sum().item() if a.shape == b.shape else -1
    record(case, f"{name} bits", differ, 0, differ == 0, "bytes differing")


def rand(shape, dtype=BF16, lo=-2.0, hi=2.0, gen=None):
    return (torch.rand(shape, generator=gen, device=DEV, dtype=F32) * (hi - lo) + lo).to(dtype)


# fp64 references ---------------------------------------------------------------------------

def norm_rope_ref(x, w, cos, sin, pos_div, eps):
    """x [T, H, 128] -> y (docs/architecture.md 4.1), float64."""
    T = x.shape[0]
    pos = torch.arange(T, device=x.device) // pos_div % cos.shape[0]
    c, s = cos.to(F64)[pos][:, None, :], sin.to(F64)[pos][:, None, :]
    rstd = torch.rsqrt((x * x).mean(-1, keepdim=True) + eps)
    n = x * rstd * w
    n0, n1 = n[..., 0::2], n[..., 1::2]
    return torch.stack((c * n0 - s * n1, s * n0 + c * n1), dim=-1).reshape(x.shape)


def qkv_parts(m, H, layout):
    """mixed_qkv [T, 3*H*128] -> q, k, v [T, H, 128] views."""
    T = m.shape[0]
    v = m.view(T, H, 3, 128).permute(0, 2, 1, 3) if layout == "megatron" else m.view(T, 3, H, 128)
    return v[:, 0], v[:, 1], v[:, 2]


def ln_ref(x, scale, shift, S, layout, eps):
    """y (docs/architecture.md 4.2), float64; per token when S is None."""
    mu = x.mean(-1, keepdim=True)
    xh = (x - mu) * torch.rsqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    if S is None:
        return xh * (1 + scale) + shift
    T = x.shape[0]
    B = T // S
    t = torch.arange(T, device=x.device)
    b = t // S if layout == "bsd" else t % B
    return xh * (1 + scale[b]) + shift[b]


# the checks every differentiable op gets -----------------------------------------------------

def check_op(case, ours, reference, inputs, diff, gen):
    """ours(*inputs) and reference(*float64 inputs) return a tuple of outputs; `diff`: the indices
    of the inputs gradients are checked for. Forward and gradients against the reference; a
    finite difference of ours; then torch.compile and CUDA graphs against eager, bit for bit."""
    xs = [t.detach().clone().requires_grad_(i in diff) if torch.is_tensor(t) else t for i, t in enumerate(inputs)]
    outs = ours(*xs)
    us = [rand(o.shape, o.dtype, -1, 1, gen) for o in outs]  # upstream gradients exact in both runs
    grads = torch.autograd.grad(outs, [xs[i] for i in diff], [u.to(o.dtype) for u, o in zip(us, outs)])
    refs_in = [t.detach().to(F64).requires_grad_(i in diff) if torch.is_tensor(t) and t.is_floating_point() else t
               for i, t in enumerate(inputs)]
    refs = reference(*refs_in)
    ref_grads = torch.autograd.grad(refs, [refs_in[i] for i in diff], [u.to(F64) for u in us])
    for j, (o, r) in enumerate(zip(outs, refs)):
        within_bf16(case, f"output {j}", o, r)
    for i, g, r in zip(diff, grads, ref_grads):
        within_bf16(case, f"grad of input {i}", g, r)

    # Finite difference of <w, ours(x)> along random bf16 directions of the differentiable
    # inputs, against the backward's <grad(w), dx> for the very perturbation applied. w is the
    # sign of the outputs' change, so that the change adds up coherently over the N outputs while
    # their bf16 rounding adds up as a random walk (sqrt(N)): with a random w, the rounding of the
    # outputs was a tenth of the smallest derivatives' difference.
    h = 2.0 ** -4
    plus, minus = list(inputs), list(inputs)
    for i in diff:
        x = inputs[i]
        d = rand(x.shape, F32, -1, 1, gen) * x.detach().float().abs().mean().clamp(min=1e-3)
        plus[i], minus[i] = (x.float() + h * d).to(x.dtype), (x.float() - h * d).to(x.dtype)
    with torch.no_grad():
        o_plus, o_minus = ours(*plus), ours(*minus)
    ws = [torch.sign(a.double() - b.double()).to(a.dtype) for a, b in zip(o_plus, o_minus)]
    xw = [t.detach().clone().requires_grad_(i in diff) if torch.is_tensor(t) else t for i, t in enumerate(inputs)]
    w_grads = torch.autograd.grad(ours(*xw), [xw[i] for i in diff], ws)
    analytic = sum((g.double() * (plus[i].double() - minus[i].double())).sum().item() for i, g in zip(diff, w_grads))
    difference = sum((w.double() * (a.double() - b.double())).sum().item() for w, a, b in zip(ws, o_plus, o_minus))
    rel = abs(difference - analytic) / max(abs(analytic), 1e-30)
    record(case, "finite difference", rel, 0.01, rel <= 0.01,
           f"relative, h = 2^-4, w = sign of the change (difference {difference:.5g})")

    def step(*args):
        o = ours(*args)
        return o, torch.autograd.grad(o, [args[i] for i in diff], [u.to(t.dtype) for u, t in zip(us, o)])

    # torch.compile: one graph, no graph break (fullgraph), no recompile over three steps on
    # fresh tensors of the same shapes.
    torch._dynamo.reset()
    graphs_before = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    compiled = torch.compile(ours, fullgraph=True, dynamic=False)
    for _ in range(3):
        xc = [t.detach().clone().requires_grad_(i in diff) if torch.is_tensor(t) else t for i, t in enumerate(inputs)]
        co = compiled(*xc)
        cg = torch.autograd.grad(co, [xc[i] for i in diff], [u.to(o.dtype) for u, o in zip(us, co)])
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs_before
    record(case, "torch.compile graphs", frames, 1, frames == 1, "over 3 steps, fullgraph")
    for j, (a, b) in enumerate(zip(co, outs)):
        same_bits(case, f"compile output {j}", a, b)
    for i, (a, b) in enumerate(zip(cg, grads)):
        same_bits(case, f"compile grad {diff[i]}", a, b)

    # CUDA graph: forward and backward captured once, replayed on the same static inputs.
    static = [t.detach().clone().requires_grad_(i in diff) if torch.is_tensor(t) else t for i, t in enumerate(inputs)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            step(*static)  # warm: resolution, module loads, allocator pools
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        go, gg = step(*static)
    graph.replay()
    torch.cuda.synchronize()
    for j, (a, b) in enumerate(zip(go, outs)):
        same_bits(case, f"graph output {j}", a, b)
    for i, (a, b) in enumerate(zip(gg, grads)):
        same_bits(case, f"graph grad {diff[i]}", a, b)
    return outs, grads


# the cases ---------------------------------------------------------------------------------

def qkv_case(gen, T, H, layout, pos_div, own_k_table, extra_columns=0):
    """extra_columns > 0: mixed_qkv is the first 3*H*128 columns of a wider projection (Flux's
    single block: QKV and the MLP input from one linear), sliced inside the checked function so that
    the op sees its row stride; the extra columns' gradient is zero."""
    positions = max(1, T // pos_div)
    C = 3 * H * 128
    m = rand((T, C + extra_columns), gen=gen)
    qw, kw = rand((128,), lo=0.5, hi=1.5, gen=gen), rand((128,), lo=0.5, hi=1.5, gen=gen)
    angle = rand((positions, 64), F32, 0, 6.283, gen)
    cos, sin = torch.cos(angle), torch.sin(angle)
    kc, ks = (torch.cos(angle * 0.5), torch.sin(angle * 0.5)) if own_k_table else (None, None)
    eps = 1e-6

    def ours(m, qw, kw):
        return mxfp6.norm_rope(m[:, :C], qw, kw, cos, sin, kc, ks, layout=layout, pos_div=pos_div, eps=eps)

    def reference(m, qw, kw):
        q, k, v = qkv_parts(m[:, :C], H, layout)
        kc64 = (kc if kc is not None else cos).to(F64)
        ks64 = (ks if ks is not None else sin).to(F64)
        return (norm_rope_ref(q, qw, cos.to(F64), sin.to(F64), pos_div, eps),
                norm_rope_ref(k, kw, kc64, ks64, pos_div, eps), v * 1)

    name = (f"norm_rope T={T} H={H} {layout} pos_div={pos_div}{' own K table' if own_k_table else ''}"
            f"{f' in {C + extra_columns} columns' if extra_columns else ''}")
    outs, grads = check_op(name, ours, reference, [m, qw, kw], (0, 1, 2), gen)
    return (m, qw, kw, cos, sin, layout, pos_div, outs, grads)


def packed_grad_case(gen, T, H):
    m = rand((T, 3 * H * 128), gen=gen)
    qw, kw = rand((128,), lo=0.5, hi=1.5, gen=gen), rand((128,), lo=0.5, hi=1.5, gen=gen)
    angle = rand((T, 64), F32, 0, 6.283, gen)
    cos, sin = torch.cos(angle), torch.sin(angle)
    us = [rand((T, H, 128), gen=gen) for _ in range(3)]
    case = f"norm_rope packed_grad T={T} H={H}"

    def run(packed, mixed_requires_grad):
        x = m.clone().requires_grad_(mixed_requires_grad)
        w = [qw.clone().requires_grad_(), kw.clone().requires_grad_()]
        outs = mxfp6.norm_rope(x, *w, cos, sin, packed_grad=packed)
        inputs = ([x] if mixed_requires_grad else []) + w
        return torch.autograd.grad(outs, inputs, us)

    plain = run(None, True)
    with_bf16 = mxfp6.PackedGrad("E3M2", "RCEIL", with_bf16=True)
    g_bf16 = run(with_bf16, True)
    only = mxfp6.PackedGrad("E3M2", "RCEIL", with_bf16=False)
    g_only = run(only, False)
    within_bf16(case, "d(mixed_qkv)", g_bf16[0], plain[0].float(), ulps=2, what="vs the plain backward")
    within_bf16(case, "dq_weight", g_bf16[1], plain[1].float(), ulps=2, what="vs the plain backward")
    # The two prologue kernels run their own default schedules, whose fp32 sums may round apart.
    within_bf16(case, "dk_weight, blobs only", g_only[1], g_bf16[2].float(), ulps=2, what="vs with bf16")
    ref = problems.mxfp6_pack_dual_torch(g_bf16[0], "E3M2", "RCEIL")
    for name, ours_blob, ref_blob in zip(("row_data", "row_scales", "col_data", "col_scales"),
                                         (with_bf16.row_data, with_bf16.row_scales, with_bf16.col_data,
                                          with_bf16.col_scales), ref):
        differ = (ours_blob != ref_blob).sum().item()
        allowed = ref_blob.numel() // 1000
        record(case, f"{name} vs packing the bf16 gradient", differ, allowed, differ <= allowed, "bytes differing")
    for name in ("row_data", "row_scales", "col_data", "col_scales"):
        a, b = getattr(only, name), getattr(with_bf16, name)
        differ, allowed = (a != b).sum().item(), b.numel() // 1000
        record(case, f"{name}, blobs only vs with bf16", differ, allowed, differ <= allowed, "bytes differing")
    try:
        mxfp6.norm_rope(m.clone().requires_grad_(), qw, kw, cos, sin, packed_grad=mxfp6.PackedGrad(with_bf16=False))
        record(case, "blobs only with mixed_qkv requiring grad", 0, 1, False, "was accepted")
    except ValueError as e:
        record(case, "blobs only with mixed_qkv requiring grad", 1, 1, "must not require grad" in str(e), "refused")


def heads_case(gen, T, H):
    """The per-tensor op on K of a Megatron mixed_qkv: a strided view, sliced inside the checked
    function so that the op sees the strides (a clone of the slice would be contiguous)."""
    m = rand((T, 3 * H * 128), gen=gen)
    w = rand((128,), lo=0.5, hi=1.5, gen=gen)
    angle = rand((T, 64), F32, 0, 6.283, gen)
    cos, sin = torch.cos(angle), torch.sin(angle)

    def k_of(m):
        return m.view(T, H, 3, 128)[:, :, 1]

    def ours(m, w):
        return (mxfp6.norm_rope_heads(k_of(m), w, cos, sin),)

    def reference(m, w):
        return (norm_rope_ref(k_of(m), w, cos.to(F64), sin.to(F64), 1, 1e-6),)

    check_op(f"norm_rope_heads T={T} H={H} strided K", ours, reference, [m, w], (0, 1), gen)


def ln_case(gen, T, S, layout):
    D = 3072
    x = rand((T, D), gen=gen)
    rows = T if S is None else T // S
    scale, shift = rand((rows, D), lo=-0.5, hi=0.5, gen=gen), rand((rows, D), gen=gen)

    def ours(x, scale, shift):
        return (mxfp6.ln_modulate(x, scale, shift, tokens_per_sample=S, layout=layout),)

    def reference(x, scale, shift):
        return (ln_ref(x, scale, shift, S, layout, 1e-6),)

    what = "per token" if S is None else f"S={S} {layout}"
    check_op(f"ln_modulate T={T} {what}", ours, reference, [x, scale, shift], (0, 1, 2), gen)


def pack_case(gen, T, C):
    # A wide range of magnitudes per block, zeros and subnormal-scale blocks included.
    x = (torch.randn((T, C), generator=gen, device=DEV) * torch.exp2(rand((T, C // 32, 1), F32, -20, 20, gen))
         .expand(T, C // 32, 32).reshape(T, C)).to(BF16)
    x[0, :32] = 0
    for fmt in ("E3M2", "E2M3"):
        for mode in ("RCEIL", "EVEN", "FLOOR"):
            ref = problems.mxfp6_pack_dual_torch(x, fmt, mode)
            for along, index in (("rows", (0, 1)), ("cols", (2, 3)), ("dual", (0, 1, 2, 3))):
                p = mxfp6.pack(x, fmt, mode, along=along)
                blobs = (p.rows or ()) + (p.cols or ())
                differ = sum((a != ref[i]).sum().item() for a, i in zip(blobs, index))
                record(f"pack [{T}, {C}] {fmt} {mode}", f"{along} vs reference", differ, 0, differ == 0,
                       "bytes differing")
    xg = x.clone().requires_grad_()
    auto_train, auto_eval = mxfp6.pack(xg), None
    with torch.no_grad():
        auto_eval = mxfp6.pack(xg)
    ok = auto_train.cols is not None and auto_train.rows is not None and auto_eval.cols is None
    record(f"pack [{T}, {C}]", "along='auto'", int(ok), 1, ok, "dual when training, rows under no_grad")
    compiled = torch.compile(lambda t: mxfp6.pack(t, "E3M2", "RCEIL", along="dual").cols, fullgraph=True)
    cols = compiled(x)
    differ = sum((a != b).sum().item() for a, b in zip(cols, ref_cols(x)))
    record(f"pack [{T}, {C}]", "compiled dual cols vs reference", differ, 0, differ == 0, "bytes differing")


def ref_cols(x):
    return problems.mxfp6_pack_cols_torch(x, "E3M2", "RCEIL")


def repeated_call_case(gen):
    """A call repeated with its shapes (a training step's) takes the kept recipe and the C ABI's
    kept launches: the same bits from other memory, and a call of those shapes at memory the
    kernels cannot take (x one element off its alignment) still refused, naming the argument."""
    T, D = 64, 3072
    x = rand((T, D), gen=gen)
    scale, shift = rand((2, D), lo=-0.5, hi=0.5, gen=gen), rand((2, D), gen=gen)
    first = mxfp6.ln_modulate(x, scale, shift, 32)
    before = mxfp6.stats()["launches"]
    for n in range(3):
        again = mxfp6.ln_modulate(x.clone(), scale.clone(), shift.clone(), 32)
        same_bits("repeated ln_modulate", f"call {n + 2} vs the first", again, first)
    launches = mxfp6.stats()["launches"] - before
    record("repeated ln_modulate", "launches", launches, 3, launches == 3, "one per call")
    memory = torch.empty(T * D + 8, dtype=BF16, device=DEV)
    off = memory[1:1 + T * D].view(T, D)
    off.copy_(x)
    try:
        mxfp6.ln_modulate(off, scale, shift, 32)
        record("repeated ln_modulate", "x off its alignment", 0, 1, False, "was accepted")
    except ValueError as e:
        record("repeated ln_modulate", "x off its alignment", 1, 1, "'x'" in str(e) and "aligned" in str(e),
               str(e)[:90])


def bad_input_cases():
    x = torch.zeros(64, 3072, dtype=BF16, device=DEV)
    s = torch.zeros(2, 3072, dtype=BF16, device=DEV)
    cases = [
        ("x on the CPU", lambda: mxfp6.ln_modulate(x.cpu(), s, s, 32), "'x' must be on a CUDA device"),
        ("scale f32", lambda: mxfp6.ln_modulate(x, s.float(), s, 32), "'scale'"),
        ("x transposed", lambda: mxfp6.ln_modulate(x.t().contiguous().t()[:, :3072], s, s, 32), "'x'"),
        ("a rotary table requiring grad",
         lambda: mxfp6.norm_rope(torch.zeros(64, 768, dtype=BF16, device=DEV, requires_grad=True),
                                 torch.ones(128, dtype=BF16, device=DEV), torch.ones(128, dtype=BF16, device=DEV),
                                 torch.ones(64, 64, device=DEV, requires_grad=True), torch.ones(64, 64, device=DEV)),
         "rotary table"),
    ]
    for what, call, message in cases:
        try:
            call()
            record("bad input", what, 0, 1, False, "was accepted")
        except ValueError as e:
            record("bad input", what, 1, 1, message in str(e), str(e)[:90])


def profile_case(gen):
    """MXFP6_PROFILE's trace: one event per op launched, with its plan, rule and GPU time."""
    import tempfile
    from mxfp6 import _profile
    _profile.enabled, _profile._spans[:] = True, []
    x = rand((64, 3072), gen=gen)
    s = rand((2, 3072), lo=-0.5, hi=0.5, gen=gen)
    mxfp6.ln_modulate(x, s, s, tokens_per_sample=32)
    mxfp6.pack(x, along="rows")
    _profile.enabled = False
    with tempfile.TemporaryDirectory() as d:
        with open(_profile.write(d)) as f:
            events = json.load(f)["traceEvents"]
    names = [e["name"] for e in events]
    ok = names == ["ln_modulate", "pack"] and all(e["args"]["gpu_us"] > 0 and e["dur"] > 0 and e["args"]["plan"]
                                                  and e["args"]["rule"] == "default" for e in events)
    record("MXFP6_PROFILE", "trace events", len(events), 2, ok, f"{names}, gpu_us "
           f"{[e['args'].get('gpu_us') for e in events]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()
    warnings.simplefilter("ignore", mxfp6.ShapeWarning)
    mxfp6.connect(f"sqlite://{os.path.abspath(args.db)}")
    gen = torch.Generator(device=DEV)
    gen.manual_seed(46)
    start = time.time()
    for layout in ("megatron", "blocked"):
        qkv_case(gen, 64, 2, layout, 1, False)
    qkv_case(gen, 128, 2, "megatron", 2, True)
    qkv_case(gen, 64, 24, "megatron", 1, False)
    qkv_case(gen, 64, 2, "blocked", 1, False, extra_columns=4 * 768)
    packed_grad_case(gen, 64, 2)
    heads_case(gen, 64, 2)
    for layout in ("bsd", "sbd"):
        ln_case(gen, 64, 32, layout)
    ln_case(gen, 64, None, "bsd")
    pack_case(gen, 64, 3072)
    repeated_call_case(gen)
    bad_input_cases()
    profile_case(gen)
    stats = mxfp6.stats()
    print(f"{len(RESULTS)} checks, {len(FAILURES)} failed, {time.time() - start:.1f} s; "
          f"{stats['launches']} launches, rules {stats['rules']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": RESULTS,
                       "failures": FAILURES, "stats": {k: v for k, v in stats.items() if k != "warned"}}, f, indent=1)
    for f in FAILURES:
        print("FAILED:", f)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
