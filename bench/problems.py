"""The benchmarked problems, one class per kernel: inputs, the PyTorch implementation (eager, and
what torch.compile compiles), the fp64 check every implementation must pass, the minimal bytes,
and the call of our op: its tensors and scalars by the op's argument names (docs/architecture.md,
"Ops"), which bench/ours.py runs every plan of through the ops layer. Semantics:
docs/architecture.md section 4; kernels_dsl/*.mxk.

Each implementation is called as fn(*problem.args) and returns the outputs in the kernel's order.
Inputs are random (never zeros, which can hide unwritten outputs and run faster than real data),
drawn like the GPU tests' (tests/gpu/*_gpu_test.cpp), and fresh for every shape.
"""
import functools

import torch

import mxfp6_spec
import partials

BF16, F32, F64 = torch.bfloat16, torch.float32, torch.float64
# eps as every implementation sees it: the f32 nearest 1e-6, so the fp64 check uses the same value.
EPS = float(torch.tensor(1e-6, dtype=F32))
STATS_REL_BOUND = 1e-5  # mean / rstd relative error, as in the GPU tests
HEAD_DIM, PAIRS = 128, 64
# fp32 accumulation: the GPU tests bound a sum accumulated in fp32 by (depth + 8) * 2^-24 * the sum of
# the terms' magnitudes, depth = the longest chain of sequential additions (ours: n/P + P).
ACCUMULATION_SLACK = 8


# ---------------------------------------------------------------------------------------------
# PyTorch implementations (fp32 math, one rounding to bf16 at the end, like the kernels)

def ln_modulate_fwd_torch(x, scale, shift, sample_div, eps):
    """y = LN(x) * (1 + scale[b]) + shift[b], b = (t / sample_div) % B ([B, S, D] tokens:
    sample_div = S; [S, B, D]: sample_div = 1); returns y, mean, rstd."""
    T, D = x.shape
    B = scale.shape[0]
    xf = x.float()
    var, mean = torch.var_mean(xf, dim=-1, correction=0)
    rstd = torch.rsqrt(var + eps)
    xh = (xf - mean[:, None]) * rstd[:, None]
    if T == B * sample_div:  # [B, S, D], whole samples: the modulation broadcasts over their tokens
        y = xh.view(B, sample_div, D) * (1 + scale.float()[:, None]) + shift.float()[:, None]
    elif sample_div == 1 and T % B == 0:  # [S, B, D], whole sequence positions
        y = xh.view(-1, B, D) * (1 + scale.float()[None]) + shift.float()[None]
    else:
        b = torch.div(torch.arange(T, device=x.device), sample_div, rounding_mode="floor") % B
        y = xh * (1 + scale.float()[b]) + shift.float()[b]
    return y.to(BF16).view(T, D), mean, rstd


def _rotary_pairs(v, cos, sin, pos_div):
    """v [T, H, 128] f32 as pairs (..., 64, 2), with each token's cos and sin rows broadcast against
    them: the position of token t is (t / pos_div) % S."""
    T, H, Dh = v.shape
    S = cos.shape[0]
    if pos_div == 1 and T % S == 0:  # batch-major whole samples: the table broadcasts, no gather
        return v.reshape(T // S, S, H, Dh // 2, 2), cos.view(1, S, 1, -1), sin.view(1, S, 1, -1)
    pos = torch.div(torch.arange(T, device=v.device), pos_div, rounding_mode="floor") % S
    return v.reshape(T, H, Dh // 2, 2), cos[pos][:, None], sin[pos][:, None]


def _norm_rope_rows(x, weight, cos, sin, pos_div, eps):
    """RMSNorm + interleaved RoPE of a [T, H, 128] view (any strides): y bf16 contiguous, rstd f32."""
    T, H, Dh = x.shape
    xf = x.float()
    rstd = torch.rsqrt(xf.square().mean(-1) + eps)
    n, c, s = _rotary_pairs(xf * rstd[..., None] * weight.float(), cos, sin, pos_div)
    n0, n1 = n[..., 0], n[..., 1]
    y = torch.stack((c * n0 - s * n1, s * n0 + c * n1), dim=-1)
    return y.reshape(T, H, Dh).to(BF16), rstd


def norm_rope_fwd_torch(x, weight, cos, sin, pos_div, eps):
    """Per-tensor: x is a [T, H, 128] view (here K, a strided slice of mixed_qkv); returns y, rstd."""
    return _norm_rope_rows(x, weight, cos, sin, pos_div, eps)


def norm_rope_qkv_fwd_torch(qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, pos_div, eps):
    """Whole QKV: qkv is the [T, 3, H, 128] view of mixed_qkv (either layout, through its strides);
    returns q, k, v (contiguous [T, H, 128]; v a bit-exact copy), q_rstd, k_rstd."""
    q, q_rstd = _norm_rope_rows(qkv[:, 0], q_weight, q_cos, q_sin, pos_div, eps)
    k, k_rstd = _norm_rope_rows(qkv[:, 1], k_weight, k_cos, k_sin, pos_div, eps)
    v = qkv[:, 2].clone(memory_format=torch.contiguous_format)
    return q, k, v, q_rstd, k_rstd


def ln_modulate_bwd_torch(g, x, scale, mean, rstd, tokens_per_sample, sequence_major=False):
    """Per-sample LN-modulate backward of [B, S, D] tokens ([S, B, D] if sequence_major), the
    formulas of docs/architecture.md 4.2 (no autograd): xh = (x - mean)*rstd, gh = g*(1 + scale[b]);
    dx = rstd*(gh - mean(gh) - xh*mean(gh*xh)); dscale[b] = sum_s g*xh; dshift[b] = sum_s g.
    Returns dx [T, D], dscale [B, D], dshift [B, D] (bf16). Per-token modulation is one token
    per sample (S = 1, B = T)."""
    T, D = g.shape
    B, S = scale.shape[0], tokens_per_sample
    view, sample_axis, gain = ((S, B, D), 0, scale.float()[None]) if sequence_major else \
        ((B, S, D), 1, scale.float()[:, None])
    gf = g.float().view(view)
    xh = ((x.float() - mean[:, None]) * rstd[:, None]).view(view)
    gh = gf * (1 + gain)
    dx = rstd.view(*view[:2], 1) * (gh - gh.mean(-1, keepdim=True) - xh * (gh * xh).mean(-1, keepdim=True))
    return dx.to(BF16).view(T, D), (gf * xh).sum(sample_axis).to(BF16), gf.sum(sample_axis).to(BF16)


def _norm_rope_bwd_rows(g, x, weight, cos, sin, rstd, pos_div):
    """Backward of RMSNorm + interleaved RoPE for a [T, H, 128] gradient g and input view x:
    dn = rotation of g by -angle; u = x*rstd; du = dn*w; dx = rstd*(du - u*sum(du*u)/128);
    dw = sum over rows of dn*u. Returns dx (bf16 [T, H, 128]) and dw (f32 [128])."""
    T, H, Dh = g.shape
    gr, c, s = _rotary_pairs(g.float(), cos, sin, pos_div)
    g0, g1 = gr[..., 0], gr[..., 1]
    dn = torch.stack((c * g0 + s * g1, c * g1 - s * g0), dim=-1).reshape(T, H, Dh)
    r = rstd[..., None]
    u = x.float() * r
    du = dn * weight.float()
    dx = r * (du - u * ((du * u).sum(-1, keepdim=True) / Dh))
    return dx.to(BF16), (dn * u).sum((0, 1))


def norm_rope_qkv_bwd_torch(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd, k_rstd,
                            pos_div):
    """Whole-QKV backward: d(mixed_qkv) as a [T, 3, H, 128] view with qkv's layout (dQ, dK
    through the backward, dV copied), and dw [2, 128] f32 (q, k)."""
    dxq, dwq = _norm_rope_bwd_rows(dq, qkv[:, 0], q_weight, q_cos, q_sin, q_rstd, pos_div)
    dxk, dwk = _norm_rope_bwd_rows(dk, qkv[:, 1], k_weight, k_cos, k_sin, k_rstd, pos_div)
    if qkv.stride(1) < qkv.stride(2):  # Megatron [T, H, 3, 128]
        dqkv = torch.stack((dxq, dxk, dv), dim=2).permute(0, 2, 1, 3)
    else:  # blocked [T, 3, H, 128]
        dqkv = torch.stack((dxq, dxk, dv), dim=1)
    return dqkv, torch.stack((dwq, dwk))


class _TorchNS:
    """mxfp6_spec's integer expressions on int32 tensors (Python ints where the spec has constants)."""
    where = staticmethod(torch.where)
    clamp_min = staticmethod(lambda x, lo: x.clamp(min=lo))
    clamp_max = staticmethod(lambda x, hi: x.clamp(max=hi))
    # 1 << n with a tensor n: built on n so it stays int32 (a Python 1 would not broadcast to it).
    shl = staticmethod(lambda a, n: (n * 0 + a) << n if not isinstance(a, torch.Tensor) else a << n)
    # floor(log2(M)) of 1 <= M < 2^8, exactly: the exponent field of M as f32.
    floor_log2 = staticmethod(lambda m: (m.to(F32).view(torch.int32) >> 23) - 127)


TORCH_NS = _TorchNS()


def mxfp6_pack_rows_torch(x, fmt, mode):
    """Row blobs of X[R, C] bf16 (C % 32 == 0), docs/mxfp6-format.md, by integer operations on the bf16
    bits (the expressions of mxfp6_spec, run on tensors): data uint8 [R, 3C/4], scales uint8
    [R, C/32]. What torch.compile compiles."""
    R, C = x.shape
    bits = x.view(torch.int16).to(torch.int32) & 0xFFFF
    blk = bits.view(R, C // 32, 32)
    mag = blk & 0x7FFF
    nonfinite = mag >= 0x7F80
    has = nonfinite.any(-1)
    amax = torch.where(nonfinite, 0, mag).amax(-1)
    scale = mxfp6_spec.scale_bytes(TORCH_NS, amax, has, fmt, mode)
    codes = mxfp6_spec.encode_codes(TORCH_NS, blk, (scale - 127)[..., None], fmt)
    codes = torch.where(has[..., None], 0x1F | (((blk >> 15) & 1) << 5), codes)  # NaN/Inf block
    c = codes.view(R, C // 4, 4)
    w = mxfp6_spec.pack_words(c[..., 0], c[..., 1], c[..., 2], c[..., 3])
    data = torch.stack((w & 0xFF, (w >> 8) & 0xFF, (w >> 16) & 0xFF), dim=-1).to(torch.uint8)
    return data.view(R, C * 3 // 4), scale.to(torch.uint8)


def mxfp6_pack_rows_torch_chunked(x, fmt, mode, out=None, max_elements=1 << 26):
    """mxfp6_pack_rows_torch over chunks of rows (eager: bounded memory for its int32 temporaries)."""
    R, C = x.shape
    data, scales = out or (torch.empty(R, C * 3 // 4, device=x.device, dtype=torch.uint8),
                           torch.empty(R, C // 32, device=x.device, dtype=torch.uint8))
    step = max(1, max_elements // C)
    for a in range(0, R, step):
        d, s = mxfp6_pack_rows_torch(x[a:a + step], fmt, mode)
        data[a:a + step].copy_(d)
        scales[a:a + step].copy_(s)
    return data, scales


def mxfp6_pack_cols_torch(x, fmt, mode):
    """Column blobs of X[R, C] bf16 (R % 32 == 0): the row blobs of X^T (docs/mxfp6-format.md), data
    uint8 [C, 3R/4] (= [C, R/32, 24]), scales uint8 [C, R/32]. What torch.compile compiles."""
    return mxfp6_pack_rows_torch(x.t().contiguous(), fmt, mode)


def mxfp6_pack_cols_torch_chunked(x, fmt, mode):
    """mxfp6_pack_cols_torch, the rows of X^T packed over chunks (eager)."""
    return mxfp6_pack_rows_torch_chunked(x.t().contiguous(), fmt, mode)


def mxfp6_pack_dual_torch(x, fmt, mode):
    """Row and column blobs of X: row data, row scales, column data, column scales."""
    return mxfp6_pack_rows_torch(x, fmt, mode) + mxfp6_pack_cols_torch(x, fmt, mode)


def mxfp6_pack_dual_torch_chunked(x, fmt, mode):
    return mxfp6_pack_rows_torch_chunked(x, fmt, mode) + mxfp6_pack_cols_torch_chunked(x, fmt, mode)


def mixed_matrix(qkv):
    """The [T, C = 3*H*128] matrix of mixed_qkv (or of d(mixed_qkv)) from its [T, 3, H, 128] view in
    either layout (Megatron [T, H, 3, 128], told by part stride < head stride; blocked [T, 3, H,
    128]): a view of a dense buffer, else a copy in that column order."""
    m = qkv.permute(0, 2, 1, 3) if qkv.stride(1) < qkv.stride(2) else qkv
    return m.reshape(qkv.shape[0], -1)


def norm_rope_qkv_bwd_pack_torch(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd, k_rstd,
                                 pos_div, fmt, mode):
    """What a user runs today instead of the packer prologue: the whole-QKV backward
    (norm_rope_qkv_bwd_torch, d(mixed_qkv) written out), then the dual packing of d(mixed_qkv)
    [T, C] read back, over chunks of rows (eager). Returns row data [T, 3C/4], row scales
    [T, C/32], column data [C, 3T/4], column scales [C, T/32], dw [2, 128] f32 and d(mixed_qkv)."""
    dqkv, dw = norm_rope_qkv_bwd_torch(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd,
                                       k_rstd, pos_div)
    return mxfp6_pack_dual_torch_chunked(mixed_matrix(dqkv), fmt, mode) + (dw, dqkv)


def norm_rope_qkv_bwd_pack_torch_whole(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd,
                                       k_rstd, pos_div, fmt, mode):
    """norm_rope_qkv_bwd_pack_torch with the packing unchunked: what torch.compile compiles."""
    dqkv, dw = norm_rope_qkv_bwd_torch(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd,
                                       k_rstd, pos_div)
    return mxfp6_pack_dual_torch(mixed_matrix(dqkv), fmt, mode) + (dw, dqkv)


# ---------------------------------------------------------------------------------------------
# The check: fp64 reference, bounds of the GPU tests

def round_bf16(r):
    """fp64 values rounded once (RNE) to bf16's 8 significant bits, kept in fp64 (the tests'
    roundToBf16; a cast through torch would round twice, via f32). Values here stay far inside
    bf16's exponent range, so no overflow or subnormal handling is needed."""
    bits = r.contiguous().view(torch.int64)
    bias = ((bits >> 45) & 1) + ((1 << 44) - 1)
    return ((bits + bias) & -(1 << 45)).view(F64)


def ulp_bf16(r):
    """bf16's ulp at |r|: 2^(clamp(ilogb|r|, -126, 127) - 7), 2^-133 at zero (interp::ulpBf16)."""
    _, e = torch.frexp(r.abs())  # |r| = m * 2^e, m in [0.5, 1): ilogb = e - 1
    e = torch.where(r == 0, torch.full_like(e, -125), e)
    k = (e - 1).clamp(-126, 127).to(torch.int64) - 7
    # 2^k built from its fp64 bits: exact, where pow/ldexp would go through f32.
    return ((k + 1023) << 52).view(F64)


class Check:
    """One implementation's errors against fp64, accumulated over row chunks.

    Bounds (tests/gpu): mean/rstd relative error <= 1e-5; a bf16 output within 1 ulp of
    bf16(ref), or, where the last operation cancels, |out - ref| <= 0.5*ulp(ref) + 2^-20*terms
    (terms = the magnitudes of that operation's addends); copies bit-exact; nothing non-finite
    (our outputs are poisoned with NaN first, so an unwritten element fails)."""

    def __init__(self):
        self.nonfinite = 0
        self.stats_rel = 0.0
        self.max_ulp = 0.0
        self.beyond_1ulp = 0
        self.beyond_bound = 0
        self.max_bound_fraction = 0.0
        self.copy_mismatch_rows = 0
        self.elements = 0

    def stats(self, out, ref):
        out = out.double()
        finite = torch.isfinite(out)
        self.nonfinite += int((~finite).sum())
        rel = torch.where(finite, (out - ref).abs() / ref.abs(), torch.zeros_like(ref))
        self.stats_rel = max(self.stats_rel, float(rel.max()))

    def rounded(self, out, ref, terms, factor=2.0 ** -20):
        """out: bf16 result; ref: its fp64 value; terms(): the addends' magnitudes (built lazily),
        the bound beyond 1 ulp being 0.5*ulp(ref) + factor*terms (2^-20 for one operation's
        cancellation; (depth + 8)*2^-24 for an fp32 accumulation)."""
        g = out.double()
        finite = torch.isfinite(g)
        self.nonfinite += int((~finite).sum())
        self.elements += g.numel()
        rr = round_bf16(ref)
        ulps = torch.where(finite, (g - rr).abs() / ulp_bf16(rr), torch.zeros_like(g))
        self.max_ulp = max(self.max_ulp, float(ulps.max()))
        beyond = ulps > 1
        n_beyond = int(beyond.sum())
        if n_beyond:
            self.beyond_1ulp += n_beyond
            err = (g - ref).abs()
            bound = 0.5 * ulp_bf16(ref) + terms() * factor
            frac = torch.where(beyond, err / bound, torch.zeros_like(err))
            self.max_bound_fraction = max(self.max_bound_fraction, float(frac.max()))
            self.beyond_bound += int((beyond & (err > bound)).sum())

    def bounded(self, out, ref, bound):
        """An f32 output (a sum, not rounded to bf16): |out - ref| <= bound elementwise."""
        o = out.double()
        finite = torch.isfinite(o)
        self.nonfinite += int((~finite).sum())
        self.elements += o.numel()
        err = torch.where(finite, (o - ref).abs(), torch.zeros_like(ref))
        self.max_bound_fraction = max(self.max_bound_fraction, float((err / (bound + 1e-300)).max()))
        self.beyond_bound += int((err > bound).sum())

    def copy(self, out, src):
        """Rows (last dim) of out that are not bit-identical to src."""
        a = out.contiguous().view(torch.int16)
        b = src.contiguous().view(torch.int16)
        self.copy_mismatch_rows += int((a != b).any(dim=-1).sum())

    def ok(self):
        return (self.nonfinite == 0 and self.stats_rel <= STATS_REL_BOUND and self.beyond_bound == 0
                and self.copy_mismatch_rows == 0)

    def summary(self):
        return {"ok": self.ok(), "nonfinite": self.nonfinite, "stats_rel": self.stats_rel,
                "max_ulp": self.max_ulp, "beyond_1ulp": self.beyond_1ulp, "beyond_bound": self.beyond_bound,
                "max_bound_fraction": self.max_bound_fraction, "copy_mismatch_rows": self.copy_mismatch_rows,
                "elements": self.elements}


def _check_rotated(chk, x, weight, cos, sin, pos_div, y, rstd, chunk=2048):
    """Accumulates into chk the errors of y, rstd (outputs of one [T, H, 128] input x)."""
    T, H, Dh = x.shape
    S = cos.shape[0]
    w, c64, s64 = weight.double(), cos.double(), sin.double()
    for a in range(0, T, chunk):
        b = min(T, a + chunk)
        x64 = x[a:b].double()
        r64 = (x64.square().mean(-1) + EPS).rsqrt()
        n = x64 * r64[..., None] * w
        pos = torch.div(torch.arange(a, b, device=x.device), pos_div, rounding_mode="floor") % S
        c, s = c64[pos][:, None], s64[pos][:, None]
        n0, n1 = n[..., 0::2], n[..., 1::2]
        ref = torch.stack((c * n0 - s * n1, s * n0 + c * n1), dim=-1).reshape(b - a, H, Dh)
        terms = lambda: torch.stack(((c * n0).abs() + (s * n1).abs(), (s * n0).abs() + (c * n1).abs()),
                                    dim=-1).reshape(b - a, H, Dh)
        chk.stats(rstd[a:b], r64)
        chk.rounded(y[a:b], ref, terms)


# ---------------------------------------------------------------------------------------------
# Problems

def _generator(device, seed):
    return torch.Generator(device=device).manual_seed(seed)


def _rope_table(positions, g, device):
    """cos, sin [S, 64] f32 of random angles (every rotation, not only a schedule's)."""
    angle = (torch.rand(positions, PAIRS, generator=g, device=device, dtype=F64) * 2 - 1) * torch.pi
    return angle.cos().float(), angle.sin().float()


def tree_depth(P):
    """The longest chain of additions of the dw partials' reduction tree over P partials (the
    ops layer's: ops/op_table.h treeChunks, mirrored by partials.tree_chunks)."""
    return sum(partials.tree_chunks(P))


def row_partials_depth(rows):
    """The accumulation depth of the per-row norm+RoPE backward passes: P = min(8192, rows) programs
    each summing every P-th row, then the tree over the P partials."""
    P = min(ROW_PARTIALS, rows)
    return -(-rows // P) + tree_depth(P)


ROW_PARTIALS = 8192  # ops/op_table.h kNormRopeRowPartials


class Problem:
    """What run.py needs of a problem: name, kernel (our op, ops/op_table.cpp), variant (the op's
    variant text: "layout=bsd", "FMT=E3M2,MODE=RCEIL"), family, label, shape, tokens, rows, BYTES,
    min_bytes(), make(device, seed), args, torch_fn (eager; compile_fn, when set, is what
    torch.compile compiles instead), alloc_outputs(), call(outs), check(outs), check_of(plan),
    free(). A problem whose op writes fewer outputs than its check needs names a twin_op: ours at
    the same plan with more outputs, run once untimed into alloc_outputs(twin=True)."""
    copy_target = 0.90  # docs/architecture.md section 8: forward kernels
    compile_mode_auto = "max-autotune-no-cudagraphs"  # --compile-mode auto
    compile_fn = None
    variant = ""
    twin_op = None

    def check_of(self, plan, twinned=False):
        """The check of a plan of ours (its JSON, ops/plan.h): the problem's, at the plan's
        accumulation depth where its launches sum partials."""
        return self.check


# Token layouts of LN-modulate (docs/architecture.md section 4.2): batch-major [B, S, D], the sample of token
# t is t / S; sequence-major [S, B, D], it is t % B. The name suffix, the label's and the shape's.
TOKEN_LAYOUTS = {"bsd": ("", "", "[B, S, D]"), "sbd": (":sequence-major", " [S, B, D]", "[S, B, D]")}


class LnModulate(Problem):
    """LN-modulate forward, per-sample modulation, tokens [B, S, D] (sample_div = S) or [S, B, D]
    (sample_div = 1): ours is the op's rows plans (ln_modulate_fwd) or its samples plans
    (ln_modulate_fwd_samples), whichever is faster."""
    kernel = "ln_modulate_fwd"
    samples_kernel = "ln_modulate_fwd_samples"
    family = "LN-modulate fwd"
    torch_fn = staticmethod(ln_modulate_fwd_torch)
    D = 3072
    # Minimal bytes: x read once, scale and shift read once each (B rows), y, mean, rstd written once.
    BYTES = "2*T*D (x) + 2*2*B*D (scale, shift) + 2*T*D (y) + 2*4*T (mean, rstd)"

    def __init__(self, tokens, tokens_per_sample=512, layout="bsd"):
        assert tokens % tokens_per_sample == 0, "whole samples"
        self.T, self.S, self.B = tokens, tokens_per_sample, tokens // tokens_per_sample
        self.layout, self.variant = layout, f"layout={layout}"
        self.sample_div = tokens_per_sample if layout == "bsd" else 1
        self.tokens, self.rows = tokens, tokens
        suffix, label, shape = TOKEN_LAYOUTS[layout]
        self.label = f"T={tokens}{label}"
        self.name = f"{self.kernel}:T={tokens}{suffix}"
        self.shape = {"T": tokens, "B": self.B, "S": tokens_per_sample, "D": self.D, "layout": shape}

    def min_bytes(self):
        T, B, D = self.T, self.B, self.D
        return 2 * T * D + 2 * 2 * B * D + 2 * T * D + 2 * 4 * T

    def make(self, device, seed):
        g, T, B, D = _generator(device, seed), self.T, self.B, self.D
        u = lambda *shape: torch.rand(*shape, generator=g, device=device)
        # Per-token offsets and spreads: |mean| >= ~0.4 so the mean's relative error means something.
        center = torch.where(u(T, 1) < 0.5, -1.0, 1.0) * (0.5 + 1.5 * u(T, 1))
        x = center + (0.5 + 1.5 * u(T, 1)) * torch.randn(T, D, generator=g, device=device)
        scale = 0.5 * torch.randn(B, D, generator=g, device=device)
        shift = 0.5 * torch.randn(B, D, generator=g, device=device)
        self.args = (x.to(BF16), scale.to(BF16), shift.to(BF16), self.sample_div, EPS)

    def alloc_outputs(self):
        x = self.args[0]
        return (torch.empty_like(x), torch.empty(self.T, device=x.device, dtype=F32),
                torch.empty(self.T, device=x.device, dtype=F32))

    def call(self, outs):
        x, scale, shift, _, eps = self.args
        y, mean, rstd = outs
        return ([("x", x), ("scale", scale), ("shift", shift), ("y", y), ("mean", mean), ("rstd", rstd)],
                {"tokens_per_sample": self.S, "eps": eps})

    def check(self, outs, chunk=4096):
        x, scale, shift, sample_div, _ = self.args
        y, mean, rstd = outs
        chk = Check()
        sc, sh = scale.double(), shift.double()
        for a in range(0, self.T, chunk):
            b = min(self.T, a + chunk)
            x64 = x[a:b].double()
            mu = x64.mean(-1)
            d = x64 - mu[:, None]
            r = ((d * d).mean(-1) + EPS).rsqrt()
            s = torch.div(torch.arange(a, b, device=x.device), sample_div, rounding_mode="floor") % self.B
            gain = r[:, None] * (1 + sc[s])
            ref = d * gain + sh[s]
            terms = lambda: (x64.abs() + mu.abs()[:, None]) * gain.abs() + sh[s].abs()
            chk.stats(mean[a:b], mu)
            chk.stats(rstd[a:b], r)
            chk.rounded(y[a:b], ref, terms)
        return chk

    def free(self):
        self.args = None


class _PerTokenModulation:
    """Per-token modulation as the per-sample problem with one token per sample (B = T): what the
    baselines take, and what the checks compare against."""

    def __init__(self, tokens):
        super().__init__(tokens, tokens_per_sample=1)
        self.shape = {"T": tokens, "D": self.D, "modulation": "per token"}
        self.variant = ""  # the per-token ops have no token layout: every token is its own sample

    def call(self, outs):
        """The per-sample call without tokens_per_sample (scale and shift are [T, D])."""
        tensors, scalars = super().call(outs)
        scalars.pop("tokens_per_sample")
        return tensors, scalars


class LnModulatePerToken(_PerTokenModulation, LnModulate):
    """LN-modulate forward, per-token modulation: scale and shift [T, D], a row per token. The
    baselines take it as per-sample modulation with one token per sample (sample_div = 1, B = T)."""
    kernel = "ln_modulate_fwd_per_token"
    family = "LN-modulate fwd, per-token"
    BYTES = "2*T*D (x) + 2*2*T*D (scale, shift) + 2*T*D (y) + 2*4*T (mean, rstd)"


class _NormRopeBase(Problem):
    heads = 24
    positions = 512  # S: tokens per sample

    def __init__(self, rows, sequence_major=False):
        """Tokens batch-major [B, S] (pos_div = 1) or sequence-major [S, B] (pos_div = B)."""
        assert rows % self.heads == 0
        self.T = rows // self.heads
        self.tokens, self.rows = self.T, rows
        assert self.T % self.positions == 0, "whole samples"
        self.pos_div = self.T // self.positions if sequence_major else 1
        self.order_suffix = ":sequence-major" if sequence_major else ""
        self.order_label = " [S, B] tokens" if sequence_major else ""

    def describe(self, label, **shape):
        """name, label and shape from the kernel, the label's rows and layout, and shape extras."""
        self.label = label + self.order_label
        self.shape = {"rows": self.rows, "T": self.T, "H": self.heads, "S": self.positions, **shape,
                      "tokens": "[S, B]" if self.pos_div > 1 else "[B, S]", "pos_div": self.pos_div}

    def _mixed_qkv(self, g, device):
        """mixed_qkv [T, 3*H*128] bf16: rows of 128 with per-row spreads, so rstd varies."""
        T, H = self.T, self.heads
        spread = 0.25 + 3.75 * torch.rand(T * 3 * H, 1, generator=g, device=device)
        rows = torch.randn(T * 3 * H, HEAD_DIM, generator=g, device=device) * spread
        return rows.to(BF16).view(T, 3 * H * HEAD_DIM)

    def _weight(self, g, device):
        return (1 + 0.2 * torch.randn(HEAD_DIM, generator=g, device=device)).to(BF16)

    def _k_slice(self, mixed):
        """K of a Megatron [T, H, 3, 128] mixed_qkv: strides (3*H*128, 3*128, 1)."""
        return mixed.view(self.T, self.heads, 3, HEAD_DIM)[:, :, 1]

    def _empty_rows(self, dtype, like):
        shape = (self.T, self.heads, HEAD_DIM) if dtype == BF16 else (self.T, self.heads)
        return torch.empty(shape, device=like.device, dtype=dtype)

    def free(self):
        self.args = self.mixed = None


class NormRopeQkv(_NormRopeBase):
    """Whole-QKV forward: one launch reads mixed_qkv, writes q, k, v and both rstd."""
    kernel = "norm_rope_qkv_fwd"
    family = "norm+RoPE whole-QKV fwd"
    torch_fn = staticmethod(norm_rope_qkv_fwd_torch)
    # Minimal bytes: all of mixed_qkv read once, the two weights and the Q and K tables (cos and sin
    # each) read once; q, k, v written once and both rstd written once.
    BYTES = "3*R*128*2 (mixed_qkv) + 2*128*2 (weights) + 4*S*64*4 (tables) + 3*R*128*2 (q, k, v) + 2*R*4 (rstd), R = T*H"

    def __init__(self, rows, layout, sequence_major=False):
        super().__init__(rows, sequence_major)
        assert layout in ("megatron", "blocked")
        self.layout, self.variant = layout, f"layout={layout}"
        self.name = f"{self.kernel}:rows={rows}:{layout}{self.order_suffix}"
        self.describe(f"rows={rows} {layout}", layout=layout)

    def min_bytes(self):
        R, S = self.rows, self.positions
        return 3 * R * HEAD_DIM * 2 + 2 * HEAD_DIM * 2 + 4 * S * PAIRS * 4 + 3 * R * HEAD_DIM * 2 + 2 * R * 4

    def make(self, device, seed):
        g, T, H = _generator(device, seed), self.T, self.heads
        self.mixed = self._mixed_qkv(g, device)
        if self.layout == "megatron":  # [T, H, 3, 128]: q|k|v inside each head
            qkv = self.mixed.view(T, H, 3, HEAD_DIM).permute(0, 2, 1, 3)
        else:  # blocked [T, 3, H, 128]: all Q, then K, then V
            qkv = self.mixed.view(T, 3, H, HEAD_DIM)
        q_cos, q_sin = _rope_table(self.positions, g, device)
        k_cos, k_sin = _rope_table(self.positions, g, device)  # separate tables: a swap would show
        self.args = (qkv, self._weight(g, device), self._weight(g, device), q_cos, q_sin, k_cos, k_sin, self.pos_div,
                     EPS)

    def alloc_outputs(self):
        m = self.mixed
        return tuple(self._empty_rows(BF16, m) for _ in range(3)) + tuple(self._empty_rows(F32, m) for _ in range(2))

    def call(self, outs):
        qkv, qw, kw, qc, qs, kc, ks, pos_div, eps = self.args
        return ([("qkv", qkv), ("q_weight", qw), ("k_weight", kw), ("q_cos", qc), ("q_sin", qs), ("k_cos", kc),
                 ("k_sin", ks)] + list(zip(("q", "k", "v", "q_rstd", "k_rstd"), outs)),
                {"pos_div": pos_div, "eps": eps})

    def check(self, outs):
        qkv, qw, kw, qc, qs, kc, ks, pos_div, _ = self.args
        q, k, v, qr, kr = outs
        chk = Check()
        _check_rotated(chk, qkv[:, 0], qw, qc, qs, pos_div, q, qr)
        _check_rotated(chk, qkv[:, 1], kw, kc, ks, pos_div, k, kr)
        chk.copy(v, qkv[:, 2])
        return chk


class NormRopeSlice(_NormRopeBase):
    """Per-tensor forward of K, read as a strided slice of a Megatron [T, H, 3, 128] mixed_qkv."""
    kernel = "norm_rope_fwd"
    family = "norm+RoPE per-tensor fwd (K slice)"
    torch_fn = staticmethod(norm_rope_fwd_torch)
    # Minimal bytes: only the K slice of mixed_qkv is read (256-byte runs, no partial sectors), the
    # weight and the table (cos, sin) once; y and rstd written once.
    BYTES = "R*128*2 (K slice) + 128*2 (weight) + 2*S*64*4 (table) + R*128*2 (y) + R*4 (rstd), R = T*H"

    def __init__(self, rows, sequence_major=False):
        super().__init__(rows, sequence_major)
        self.name = f"{self.kernel}:rows={rows}{self.order_suffix}"
        self.describe(f"rows={rows} K of megatron", layout="megatron K slice")

    def min_bytes(self):
        R, S = self.rows, self.positions
        return R * HEAD_DIM * 2 + HEAD_DIM * 2 + 2 * S * PAIRS * 4 + R * HEAD_DIM * 2 + R * 4

    def make(self, device, seed):
        g = _generator(device, seed)
        self.mixed = self._mixed_qkv(g, device)
        x = self._k_slice(self.mixed)
        cos, sin = _rope_table(self.positions, g, device)
        self.args = (x, self._weight(g, device), cos, sin, self.pos_div, EPS)

    def alloc_outputs(self):
        return self._empty_rows(BF16, self.mixed), self._empty_rows(F32, self.mixed)

    def call(self, outs):
        x, w, c, s, pos_div, eps = self.args
        y, rstd = outs
        return [("x", x), ("weight", w), ("cos", c), ("sin", s), ("y", y), ("rstd", rstd)], {"pos_div": pos_div, "eps": eps}

    def check(self, outs):
        x, w, c, s, pos_div, _ = self.args
        y, rstd = outs
        chk = Check()
        _check_rotated(chk, x, w, c, s, pos_div, y, rstd)
        return chk


class LnModulateBwd(Problem):
    """LN-modulate backward, per-sample modulation, tokens [B, S, D] or [S, B, D]. Ours is two
    launches timed as one: ln_modulate_bwd (dx, and fp32 partials of dscale/dshift: P per sample,
    partial j summing tokens j, j + P, ...) then ln_modulate_bwd_reduce (the P partials in order).
    P is a choice of the op's plans (ops/op_table.cpp), so every P is a plan of ours."""
    kernel = "ln_modulate_bwd"
    family = "LN-modulate bwd"
    torch_fn = staticmethod(ln_modulate_bwd_torch)
    copy_target = 0.85  # docs/architecture.md section 8: backward kernels
    compile_mode_auto = "default"
    D = 3072
    # P = 32 and 64 lost to 8 with every schedule and reduction (results -5 and -9: the partials'
    # traffic grows with P, the pass gains no parallelism once registers cap it at 2 programs/SM).
    # P = 12 lost to 8 as well (run -21), also where registers were capped for 3 programs per SM.
    # P = 4 wins at T = 32768 (64 samples: 256 programs, one wave of 2 per SM, and half the
    # partials' traffic of P = 8) and loses at T = 16384, where its 128 programs leave half the
    # GPU idle (b1bc92a:bench/results/2026-12-01-h200-4-ln_modulate_bwd-p4.md). The op table's
    # choices; the shape's record.
    PARTIALS = (8, 4, 16)
    # Minimal bytes: g, x read once, scale (B rows), mean and rstd read once; dx, dscale, dshift
    # written once. Our partials are overhead, not minimal bytes.
    BYTES = ("2*T*D (g) + 2*T*D (x) + 2*B*D (scale) + 2*4*T (mean, rstd) + 2*T*D (dx) + 2*2*B*D (dscale, dshift); "
             "the fp32 partials (2*4*B*P*D bytes written, then read back by the reduction) are overhead, not counted")

    def __init__(self, tokens, tokens_per_sample=512, layout="bsd"):
        assert tokens % tokens_per_sample == 0, "whole samples"
        self.T, self.S, self.B = tokens, tokens_per_sample, tokens // tokens_per_sample
        self.layout, self.variant = layout, f"layout={layout}"
        self.tokens, self.rows = tokens, tokens
        suffix, label, shape = TOKEN_LAYOUTS[layout]
        self.label = f"T={tokens}{label}"
        self.name = f"{self.kernel}:T={tokens}{suffix}"
        self.shape = {"T": tokens, "B": self.B, "S": tokens_per_sample, "D": self.D, "layout": shape,
                      "partials_per_sample": [P for P in self.PARTIALS if P <= tokens_per_sample]}

    def by_sample(self, t):
        """A [T, ...] tensor as [B, S, ...] (a view), whatever the token layout."""
        if self.layout == "bsd":
            return t.view(self.B, self.S, *t.shape[1:])
        return t.view(self.S, self.B, *t.shape[1:]).transpose(0, 1)

    def min_bytes(self):
        T, B, D = self.T, self.B, self.D
        return 2 * T * D * 2 + 2 * B * D + 2 * 4 * T + 2 * T * D + 2 * 2 * B * D

    def make(self, device, seed):
        """Drawn like tests/gpu/ln_modulate_bwd_gpu_test.cpp: g ~ N(0, 1); x per token offset
        U(-2, 2), spread U(0.5, 2); scale ~ N(0, 0.5); mean and rstd of x (fp64, eps 1e-6) as f32."""
        g, T, B, D = _generator(device, seed), self.T, self.B, self.D
        u = lambda *shape: torch.rand(*shape, generator=g, device=device)
        grad = torch.randn(T, D, generator=g, device=device).to(BF16)
        x = ((4 * u(T, 1) - 2) + (0.5 + 1.5 * u(T, 1)) * torch.randn(T, D, generator=g, device=device)).to(BF16)
        scale = (0.5 * torch.randn(B, D, generator=g, device=device)).to(BF16)
        x64 = x.double()
        mean = x64.mean(-1)
        rstd = 1 / ((x64 - mean[:, None]).square().mean(-1) + 1e-6).sqrt()
        del x64
        self.args = (grad, x, scale, mean.float(), rstd.float(), self.S, self.layout == "sbd")

    def alloc_outputs(self):
        g = self.args[0]
        return (torch.empty_like(g), torch.empty(self.B, self.D, device=g.device, dtype=BF16),
                torch.empty(self.B, self.D, device=g.device, dtype=BF16))

    def call(self, outs):
        g, x, scale, mean, rstd, S, _ = self.args
        return ([("g", g), ("x", x), ("scale", scale), ("mean", mean), ("rstd", rstd)]
                + list(zip(("dx", "dscale", "dshift"), outs)), {"tokens_per_sample": S})

    def check_of(self, plan, twinned=False):
        """dscale, dshift summed by P partials per sample of S/P tokens each, then P in order."""
        P = plan["partials"]
        return functools.partial(self.check, depth=-(-self.S // P) + P)

    def check(self, outs, depth=None, chunk_samples=8):
        """dx: 1 ulp, or 0.5*ulp + 2^-20 * rstd*(|gh| + mean|gh| + |xh|~ * mean(|gh|*|xh|~)),
        |xh|~ = (|x| + |mean|)*rstd; dscale, dshift: 0.5*ulp + (depth + 8)*2^-24 * the sum of
        |g|*|xh|~ (resp. |g|) over the sample's tokens, depth = S/P + P for ours (the GPU test's
        bound) and S for a baseline (any order of S additions)."""
        g, x, scale, mean, rstd, S, _ = self.args
        dx, dscale, dshift = outs
        B, D = self.B, self.D
        factor = ((S if depth is None else depth) + ACCUMULATION_SLACK) * 2.0 ** -24
        chk = Check()
        sc = scale.double()
        # The tokens of samples b0 .. b1 as rows n*S of [n*S, D], in [B, S, D] order.
        g3, x3, dx3, m2, r2 = (self.by_sample(t) for t in (g, x, dx, mean, rstd))
        rows = lambda t, b0, b1: t[b0:b1].reshape(-1, *t.shape[2:])
        for b0 in range(0, B, chunk_samples):
            b1 = min(B, b0 + chunk_samples)
            n = b1 - b0
            g64, x64 = rows(g3, b0, b1).double(), rows(x3, b0, b1).double()
            mu, r = rows(m2, b0, b1).double()[:, None], rows(r2, b0, b1).double()[:, None]
            xh = (x64 - mu) * r
            gh = g64 * (1 + sc[b0:b1]).repeat_interleave(S, dim=0)
            ref = r * (gh - gh.mean(-1, keepdim=True) - xh * (gh * xh).mean(-1, keepdim=True))
            xhm = (x64.abs() + mu.abs()) * r

            def dx_terms():
                ghm = gh.abs()
                return r * (ghm + ghm.mean(-1, keepdim=True) + xhm * (ghm * xhm).mean(-1, keepdim=True))

            chk.rounded(rows(dx3, b0, b1), ref, dx_terms)
            gs = g64.view(n, S, D)
            chk.rounded(dscale[b0:b1], (gs * xh.view(n, S, D)).sum(1),
                        lambda: (gs.abs() * xhm.view(n, S, D)).sum(1), factor)
            chk.rounded(dshift[b0:b1], gs.sum(1), lambda: gs.abs().sum(1), factor)
        return chk

    def free(self):
        self.args = None


class LnModulateBwdPerToken(_PerTokenModulation, LnModulateBwd):
    """LN-modulate backward, per-token modulation: scale [T, D]; dscale = g*xh and dshift = g, [T, D]
    elementwise, so one launch of ln_modulate_bwd_per_token and no partials. The baselines take it as
    per-sample modulation with one token per sample (S = 1, B = T)."""
    kernel = "ln_modulate_bwd_per_token"
    family = "LN-modulate bwd, per-token"
    BYTES = "2*T*D (g) + 2*T*D (x) + 2*T*D (scale) + 2*4*T (mean, rstd) + 2*T*D (dx) + 2*2*T*D (dscale, dshift)"

    def check_of(self, plan, twinned=False):
        return functools.partial(self.check, depth=1)

    def check(self, outs, depth=None, chunk_samples=4096):
        """As LnModulateBwd's, a sample being one token: dscale one product rounded once, dshift = g."""
        return super().check(outs, depth, chunk_samples)


class NormRopeQkvBwd(_NormRopeBase):
    """Whole-QKV norm+RoPE backward. Ours is a pass writing all of d(mixed_qkv), in mixed_qkv's
    layout, and fp32 dw partials for Q and K, then norm_rope_dw_reduce launches (the P partials in a
    fixed order, a tree), timed as one. The pass is either kernel of the same math: the op's rows
    plans (norm_rope_qkv_bwd: P = min(8192, rows) programs, each a loop over every P-th row) or,
    where T % 32 == 0, its tiles plans (norm_rope_qkv_bwd_tiles: one program per 32 tokens x head,
    P = T/32 * H partials, each 32 tokens deep)."""
    kernel = "norm_rope_qkv_bwd"
    family = "norm+RoPE whole-QKV bwd"
    torch_fn = staticmethod(norm_rope_qkv_bwd_torch)
    copy_target = 0.85  # docs/architecture.md section 8: backward kernels
    compile_mode_auto = "default"
    # Minimal bytes: what the math reads once -- dq, dk, dv, the Q and K parts of mixed_qkv (not V:
    # dV is dv), both rstd, the two weights, the Q and K tables (cos and sin) -- and what it writes
    # once: all of d(mixed_qkv) and dw.
    BYTES = ("3*R*128*2 (dq, dk, dv) + 2*R*128*2 (Q, K of mixed_qkv) + 2*R*4 (rstd) + 2*128*2 (weights) + "
             "4*S*64*4 (tables; 2*S*64*4 where Q and K share one) + 3*R*128*2 (d(mixed_qkv)) + 2*128*4 (dw), R = T*H; the dw partials "
             "(2*P*128*4 bytes written, then read back by the reduction) are overhead, not counted")

    def __init__(self, rows, layout="megatron", sequence_major=False, shared_table=False):
        """shared_table: Q and K rotate by one table (Flux's), passed as both the Q and the K table
        arguments -- the caller's explicit choice (docs/architecture.md section 4.1); its bytes are read once."""
        super().__init__(rows, sequence_major)
        assert layout in ("megatron", "blocked")
        self.layout, self.variant = layout, f"layout={layout}"
        self.shared_table = shared_table
        self.table_suffix = ":shared-table" if shared_table else ""
        self.name = f"{self.kernel}:rows={rows}:{layout}{self.order_suffix}{self.table_suffix}"
        self.describe(f"rows={rows} {layout}", layout=layout, partials=min(ROW_PARTIALS, rows))
        if shared_table:
            self.label += " one table"
            self.shape["rotary_tables"] = "shared by Q and K"

    def table_bytes(self):
        """cos and sin [S, 64] f32 of Q and of K, or of the one table Q and K share."""
        return (2 if self.shared_table else 4) * self.positions * PAIRS * 4

    def min_bytes(self):
        R = self.rows
        return (3 * R * HEAD_DIM * 2 + 2 * R * HEAD_DIM * 2 + 2 * R * 4 + 2 * HEAD_DIM * 2 + self.table_bytes()
                + 3 * R * HEAD_DIM * 2 + 2 * HEAD_DIM * 4)

    def _view(self, mixed):
        """The [T, 3, H, 128] view of a [T, 3*H*128] buffer in this problem's layout."""
        T, H = self.T, self.heads
        if self.layout == "megatron":
            return mixed.view(T, H, 3, HEAD_DIM).permute(0, 2, 1, 3)
        return mixed.view(T, 3, H, HEAD_DIM)

    def make(self, device, seed):
        """Drawn like tests/gpu/norm_rope_gpu_test.cpp: mixed_qkv rows with spreads U(0.25, 4);
        dq, dk, dv ~ N(0, 1); rstd of Q and K (fp64, eps 1e-6) as f32; separate Q and K tables, or one
        passed as both where shared_table."""
        g, T, H = _generator(device, seed), self.T, self.heads
        self.mixed = self._mixed_qkv(g, device)
        qkv = self._view(self.mixed)
        q_cos, q_sin = _rope_table(self.positions, g, device)
        k_cos, k_sin = (q_cos, q_sin) if self.shared_table else _rope_table(self.positions, g, device)
        q_weight, k_weight = self._weight(g, device), self._weight(g, device)
        dq, dk, dv = (torch.randn(T, H, HEAD_DIM, generator=g, device=device).to(BF16) for _ in range(3))
        q_rstd, k_rstd = ((1 / (qkv[:, part].double().square().mean(-1) + 1e-6).sqrt()).float() for part in (0, 1))
        self.args = (dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd, k_rstd, self.pos_div)

    def bwd_args(self):
        """The backward's inputs (args of norm_rope_qkv_bwd_torch; the prologue appends its format
        and scale mode)."""
        return self.args[:13]

    def alloc_outputs(self):
        return self._view(torch.empty_like(self.mixed)), torch.empty(2, HEAD_DIM, device=self.mixed.device, dtype=F32)

    def inputs(self):
        """The backward's inputs by the op's names."""
        dq, dk, dv, qkv, qw, kw, qc, qs, kc, ks, qr, kr, _ = self.bwd_args()
        return [("dq", dq), ("dk", dk), ("dv", dv), ("qkv", qkv), ("q_weight", qw), ("k_weight", kw), ("q_cos", qc),
                ("q_sin", qs), ("k_cos", kc), ("k_sin", ks), ("q_rstd", qr), ("k_rstd", kr)]

    def call(self, outs):
        return self.inputs() + [("dqkv", outs[0]), ("dw", outs[1])], {"pos_div": self.pos_div}

    def check_of(self, plan, twinned=False):
        """The tiles plans sum 32 tokens per partial, the rows plans rows/P; then the tree."""
        tiles = plan["family"] == "tiles"
        depth = 32 + tree_depth(self.T // 32 * self.heads) if tiles else row_partials_depth(self.rows)
        return functools.partial(self.check, depth=depth)

    def check(self, outs, depth=None, chunk=2048):
        """dQ, dK: 1 ulp, or 0.5*ulp + 2^-20 * rstd*(|dn|~*|w| + |u|*sum(|dn|~*|w|*|u|)/128),
        |dn|~ the rotation's addends' magnitudes; dV: bit-exact copy; dw (f32): |out - ref| <=
        (depth + 8)*2^-24 * sum over rows of |dn|~*|u|, depth = rows/P + P: the GPU test's bound,
        for ours (rows/P = 32 for the tiled pass) and for the baselines alike (P = 8192 for them; a
        bound for any order of `rows` additions, ~rows*2^-24 of the magnitudes, would not even
        catch a zero dw)."""
        dq, dk, dv, qkv, qw, kw, qc, qs, kc, ks, qr, kr, pos_div = self.bwd_args()
        dqkv, dw = outs
        chk = Check()
        refs = [_check_norm_rope_bwd(chk, grad, qkv[:, part], w, cos, sin, rs, pos_div, dqkv[:, part], chunk)
                for part, (grad, w, cos, sin, rs) in enumerate(((dq, qw, qc, qs, qr), (dk, kw, kc, ks, kr)))]
        chk.copy(dqkv[:, 2], dv)
        if depth is None:
            P = min(ROW_PARTIALS, self.rows)
            depth = -(-self.rows // P) + P
        dw_ref, dw_mag = (torch.stack(r) for r in zip(*refs))
        chk.bounded(dw, dw_ref, (depth + ACCUMULATION_SLACK) * 2.0 ** -24 * dw_mag)
        return chk


def _check_norm_rope_bwd(chk, grad, x, weight, cos, sin, rstd, pos_div, dx, chunk=2048):
    """One tensor's backward (grad, x, dx [T, H, 128], any strides) into chk: dx within 1 ulp, or
    0.5*ulp + 2^-20 * rstd*(|dn|~*|w| + |u|*sum(|dn|~*|w|*|u|)/128), |dn|~ the rotation's addends'
    magnitudes. Returns the fp64 dw [128] and the magnitudes its bound scales with (sum of |dn|~*|u|)."""
    T, H, _ = grad.shape
    S = cos.shape[0]
    w64, c64, s64 = weight.double(), cos.double(), sin.double()
    wm = w64.abs()
    dw_ref = torch.zeros(HEAD_DIM, device=grad.device, dtype=F64)
    dw_mag = torch.zeros_like(dw_ref)
    for a in range(0, T, chunk):
        b = min(T, a + chunk)
        g64, x64, r = grad[a:b].double(), x[a:b].double(), rstd[a:b].double()[..., None]
        pos = torch.div(torch.arange(a, b, device=grad.device), pos_div, rounding_mode="floor") % S
        c, s = c64[pos][:, None], s64[pos][:, None]
        g0, g1 = g64[..., 0::2], g64[..., 1::2]
        dn = torch.stack((c * g0 + s * g1, c * g1 - s * g0), dim=-1).reshape(b - a, H, HEAD_DIM)
        u = x64 * r
        du = dn * w64
        ref = r * (du - u * ((du * u).sum(-1, keepdim=True) / HEAD_DIM))
        ca, sa, ga0, ga1 = c.abs(), s.abs(), g0.abs(), g1.abs()
        dnm = torch.stack((ca * ga0 + sa * ga1, sa * ga0 + ca * ga1), dim=-1).reshape(b - a, H, HEAD_DIM)
        um = u.abs()
        chk.rounded(dx[a:b], ref, lambda: r * (dnm * wm + um * ((dnm * wm * um).sum(-1, keepdim=True) / HEAD_DIM)))
        dw_ref += (dn * u).sum((0, 1))
        dw_mag += (dnm * um).sum((0, 1))
    return dw_ref, dw_mag


class NormRopeSliceBwd(_NormRopeBase):
    """Per-tensor norm+RoPE backward of K, a strided slice of a Megatron [T, H, 3, 128] mixed_qkv: dK
    written straight into its columns of d(mixed_qkv). Ours is norm_rope_bwd (P = min(8192, rows)
    programs, each a loop over every P-th row, an fp32 dw partial each) then norm_rope_dw_reduce
    launches (the partials in a fixed order, a tree), timed as one."""
    kernel = "norm_rope_bwd"
    family = "norm+RoPE per-tensor bwd (K slice)"
    torch_fn = staticmethod(_norm_rope_bwd_rows)
    copy_target = 0.85  # docs/architecture.md section 8: backward kernels
    compile_mode_auto = "default"
    BYTES = ("R*128*2 (dy) + R*128*2 (K slice) + R*4 (rstd) + 128*2 (weight) + 2*S*64*4 (table) + "
             "R*128*2 (dK into d(mixed_qkv)) + 128*4 (dw), R = T*H; the dw partials (P*128*4 bytes written, then "
             "read back by the reduction) are overhead, not counted")

    def __init__(self, rows, sequence_major=False):
        super().__init__(rows, sequence_major)
        self.name = f"{self.kernel}:rows={rows}{self.order_suffix}"
        self.describe(f"rows={rows} K of megatron", layout="megatron K slice", partials=min(ROW_PARTIALS, rows))

    def min_bytes(self):
        R, S = self.rows, self.positions
        return 3 * R * HEAD_DIM * 2 + R * 4 + HEAD_DIM * 2 + 2 * S * PAIRS * 4 + HEAD_DIM * 4

    def make(self, device, seed):
        """Drawn like NormRopeQkvBwd's K part: mixed_qkv rows with spreads U(0.25, 4), dy ~ N(0, 1),
        rstd of K (fp64, eps 1e-6) as f32."""
        g, T, H = _generator(device, seed), self.T, self.heads
        self.mixed = self._mixed_qkv(g, device)
        x = self._k_slice(self.mixed)
        cos, sin = _rope_table(self.positions, g, device)
        weight = self._weight(g, device)
        dy = torch.randn(T, H, HEAD_DIM, generator=g, device=device).to(BF16)
        rstd = (1 / (x.double().square().mean(-1) + 1e-6).sqrt()).float()
        self.args = (dy, x, weight, cos, sin, rstd, self.pos_div)

    def alloc_outputs(self):
        return self._k_slice(torch.empty_like(self.mixed)), torch.empty(HEAD_DIM, device=self.mixed.device, dtype=F32)

    def call(self, outs):
        dy, x, w, cos, sin, rstd, pos_div = self.args
        return ([("dy", dy), ("x", x), ("weight", w), ("cos", cos), ("sin", sin), ("rstd", rstd), ("dx", outs[0]),
                 ("dw", outs[1])], {"pos_div": pos_div})

    def check_of(self, plan, twinned=False):
        return functools.partial(self.check, depth=row_partials_depth(self.rows))

    def check(self, outs, depth=None, chunk=2048):
        """dK as _check_norm_rope_bwd; dw within (depth + 8)*2^-24 of its magnitudes, depth =
        rows/P + P with P = 8192 for a baseline too, as the whole-QKV backward's check."""
        dy, x, w, cos, sin, rstd, pos_div = self.args
        dx, dw = outs
        chk = Check()
        dw_ref, dw_mag = _check_norm_rope_bwd(chk, dy, x, w, cos, sin, rstd, pos_div, dx, chunk)
        if depth is None:
            P = min(ROW_PARTIALS, self.rows)
            depth = -(-self.rows // P) + P
        chk.bounded(dw.view(-1), dw_ref, (depth + ACCUMULATION_SLACK) * 2.0 ** -24 * dw_mag)
        return chk


class PackCheck:
    """Bit-exact comparison of packed outputs with reference blobs (mxfp6_pack_rows_torch, itself
    checked against the pure-Python transcription of docs/mxfp6-format.md: `validation`), counted per
    output name."""

    def __init__(self, validation):
        self.validation = validation
        self.differing = {}
        self.bytes = 0

    def compare(self, name, out, ref):
        """Counts the bytes of out that differ from ref: the same bytes in the same order, whatever
        the shapes (a kernel's [C, RB, 24] column data is the reference's [C, 3R/4])."""
        self.differing[name] = self.differing.get(name, 0) + int((out.reshape(-1) != ref.reshape(-1)).sum())
        self.bytes += ref.numel()

    def ok(self):
        v = self.validation
        return (bool(self.differing) and not any(self.differing.values()) and not v["worked_example_failures"]
                and v["spec_blocks_differing"] == 0)

    def summary(self):
        return {"ok": self.ok(), **{f"{name}_bytes_differing": n for name, n in self.differing.items()},
                "bytes": self.bytes, "reference_validation": self.validation}


class Checks:
    """Several checks of one implementation's outputs: ok when every one is."""

    def __init__(self, **parts):
        self.parts = parts

    def ok(self):
        return all(c.ok() for c in self.parts.values())

    def summary(self):
        return {"ok": self.ok(), **{name: c.summary() for name, c in self.parts.items()}}


class Unchecked:
    """A check that could not be made (a missing reference): fails, saying why."""

    def __init__(self, why):
        self.why = why

    def ok(self):
        return False

    def summary(self):
        return {"ok": False, "why": self.why}


_WORKED_TORCH = {}


def _worked_examples_torch(device, fmt, mode):
    """The spec's worked examples (mxfp6_spec.WORKED) through mxfp6_pack_rows_torch: failures."""
    key = (str(device), fmt, mode)
    if key not in _WORKED_TORCH:
        failures = []
        for values, f, modes in mxfp6_spec.WORKED:
            if f != fmt:
                continue
            want_scale, want_codes = modes[mode]
            bits = [mxfp6_spec.bf16_bits(v) for v in values] + [0] * (32 - len(values))
            row = torch.tensor([b - 0x10000 if b >= 0x8000 else b for b in bits], dtype=torch.int16, device=device)
            data, scales = mxfp6_pack_rows_torch(row.view(BF16).view(1, 32), fmt, mode)
            codes = list(want_codes) + [0] * (32 - len(want_codes))
            want = [byte for i in range(0, 32, 4) for byte in mxfp6_spec.pack4_spec(*codes[i:i + 4])]
            if int(scales[0, 0]) != want_scale or data[0].tolist() != want:
                failures.append(f"{values} {fmt} {mode}")
        _WORKED_TORCH[key] = failures
    return _WORKED_TORCH[key]


def _row_blobs_reference(x, fmt, mode, sample_blocks=256):
    """(data, scales, validation): the row blobs of x [R, C] (contiguous) through
    mxfp6_pack_rows_torch, and how they compare with the spec: its worked examples through the
    same encoder, and `sample_blocks` blocks of x through the pure-Python transcription."""
    data, scales = mxfp6_pack_rows_torch_chunked(x, fmt, mode)
    blocks = x.numel() // 32
    gen = torch.Generator(device="cpu").manual_seed(12345)
    idx = torch.randint(0, blocks, (sample_blocks,), generator=gen).sort().values.to(x.device)
    xs = x.view(torch.int16).view(-1, 32)[idx].cpu().tolist()
    ds = data.view(-1, 24)[idx].cpu().tolist()
    ss = scales.view(-1)[idx].cpu().tolist()
    differing = 0
    for bits, d, sb in zip(xs, ds, ss):
        want_scale, codes = mxfp6_spec.encode_block_spec([b & 0xFFFF for b in bits], fmt, mode)
        want = [byte for i in range(0, 32, 4) for byte in mxfp6_spec.pack4_spec(*codes[i:i + 4])]
        differing += want_scale != sb or want != d
    validation = {"worked_example_failures": _worked_examples_torch(x.device, fmt, mode),
                  "spec_blocks_checked": len(xs), "spec_blocks_differing": differing}
    return data, scales, validation


def _blobs_reference(x, fmt, mode, rows, cols, sample_blocks=256):
    """(blobs, validation) of x [R, C]: the row blobs (data, scales) if `rows`, then the column
    blobs (the row blobs of x^T) if `cols`; validation of both, added up."""
    blobs, validations = (), []
    for wanted, operand in ((rows, lambda: x), (cols, lambda: x.t().contiguous())):
        if wanted:
            data, scales, validation = _row_blobs_reference(operand(), fmt, mode, sample_blocks)
            blobs += (data, scales)
            validations.append(validation)
    return blobs, {"worked_example_failures": sorted({f for v in validations for f in v["worked_example_failures"]}),
                   "spec_blocks_checked": sum(v["spec_blocks_checked"] for v in validations),
                   "spec_blocks_differing": sum(v["spec_blocks_differing"] for v in validations)}


class MxPackRows(Problem):
    """MXFP6 row packing of a bf16 operand X[T, C] (docs/mxfp6-format.md): data [T, 3C/4], scales
    [T, C/32]. Checked bit for bit against mxfp6_pack_rows_torch (integer operations on the bf16
    bits), which is validated first on the spec's worked examples and on sampled blocks of the
    same input against the pure-Python transcription of the spec (mxfp6_spec)."""
    kernel = "mxfp6_pack_rows"
    what = "row"
    torch_fn = staticmethod(mxfp6_pack_rows_torch_chunked)
    compile_fn = staticmethod(mxfp6_pack_rows_torch)
    copy_target = 0.85  # docs/architecture.md section 8: row-only packing
    compile_mode_auto = "default"
    SAMPLE_BLOCKS = 256
    # The outputs, in order, by the names their check counts differing bytes under; which blobs.
    OUTPUTS = ("data", "scale")
    ROW_BLOBS, COLUMN_BLOBS = True, False
    # Minimal bytes: X read once; the packed data (24 bytes per 32 elements) and one scale byte
    # per block written once.
    BYTES = "2*T*C (x) + T*3*C/4 (data) + T*C/32 (scales)"

    def __init__(self, tokens, cols, fmt, mode="RCEIL"):
        assert cols % 32 == 0 and fmt in mxfp6_spec.FORMATS and mode in mxfp6_spec.MODES
        assert tokens % 32 == 0 or not self.COLUMN_BLOBS, "column blocks are 32 whole rows"
        self.T, self.C, self.fmt, self.mode = tokens, cols, fmt, mode
        self.variant = f"FMT={fmt},MODE={mode}"
        self.tokens, self.rows = tokens, tokens
        self.family = f"MXFP6 {self.what} pack {fmt} {mode}"
        self.label = f"T={tokens} C={cols}"
        self.name = f"{self.kernel}:{fmt}:T={tokens}:C={cols}"
        self.shape = {"T": tokens, "C": cols, "format": fmt, "scale_mode": mode}
        self._reference = None

    def min_bytes(self):
        T, C = self.T, self.C
        return 2 * T * C + T * C * 3 // 4 + T * C // 32

    def make(self, device, seed):
        """Drawn like tests/gpu/mxfp6_pack_gpu_test.cpp: blocks of N(0, 2^U(-20, 20)) values, and
        one block in 16 each of: zeros, bf16 subnormals, +Inf, NaN, -Inf, the largest finite."""
        g, T, C = _generator(device, seed), self.T, self.C
        x = torch.empty(T, C, device=device, dtype=BF16)
        out = x.view(torch.int16)
        step = max(1, (1 << 24) // C)
        lanes = torch.arange(32, device=device)[None, :]
        for a in range(0, T, step):
            b = min(T, a + step)
            nb = (b - a) * C // 32
            spread = torch.exp2((torch.rand(nb, 1, generator=g, device=device) * 2 - 1) * 20)
            v = (torch.randn(nb, 32, generator=g, device=device) * spread).to(BF16)
            bits = v.view(torch.int16).to(torch.int32) & 0xFFFF
            kind = torch.randint(0, 16, (nb, 1), generator=g, device=device)
            lane = lanes == torch.randint(0, 32, (nb, 1), generator=g, device=device)
            bits = torch.where(kind == 0, 0, bits)
            bits = torch.where(kind == 1, bits & 0x807F, bits)
            for k, special in ((2, 0x7F80), (3, 0x7FC1), (4, 0xFF80), (5, 0x7F7F)):
                bits = torch.where((kind == k) & lane, special, bits)
            out[a:b].copy_(torch.where(bits >= 0x8000, bits - 0x10000, bits).to(torch.int16).view(b - a, C))
        self.args = (x, self.fmt, self.mode)
        self._reference = None

    def reference(self):
        """(blobs, validation): the reference blobs in OUTPUTS order, and how they compare with the spec."""
        if self._reference is None:
            x, fmt, mode = self.args
            self._reference = _blobs_reference(x, fmt, mode, self.ROW_BLOBS, self.COLUMN_BLOBS, self.SAMPLE_BLOCKS)
        return self._reference

    def alloc_outputs(self):
        x = self.args[0]
        return (torch.empty(self.T, self.C * 3 // 4, device=x.device, dtype=torch.uint8),
                torch.empty(self.T, self.C // 32, device=x.device, dtype=torch.uint8))

    def call(self, outs):
        names = ("data", "scales") if len(self.OUTPUTS) == 2 else ("row_data", "row_scales", "col_data", "col_scales")
        return [("x", self.args[0])] + list(zip(names, outs)), {}

    def check(self, outs):
        blobs, validation = self.reference()
        assert len(outs) == len(blobs) == len(self.OUTPUTS), "one output per reference blob"
        chk = PackCheck(validation)
        for name, out, ref in zip(self.OUTPUTS, outs, blobs):
            chk.compare(name, out, ref)
        return chk

    def free(self):
        self.args = self._reference = None


class MxPackCols(MxPackRows):
    """MXFP6 column packing of X[T, C] (T % 32 == 0): the row blobs of X^T, data [C, T/32, 24]
    (stored as [C, 3T/4]), scales [C, T/32]. Ours reads X as [T/(32 HB), HB, 32, C], one program
    per (group of HB row blocks, tile of W columns); a schedule whose HB does not divide T/32 has
    no plan at that T. Checked bit for bit against mxfp6_pack_rows_torch of X^T, validated
    like the row packer's reference (worked examples, sampled blocks of X^T against the spec)."""
    kernel = "mxfp6_pack_cols"
    what = "column"
    torch_fn = staticmethod(mxfp6_pack_cols_torch_chunked)
    compile_fn = staticmethod(mxfp6_pack_cols_torch)
    copy_target = 0.80  # docs/architecture.md section 8: column-only and dual packing
    OUTPUTS = ("col_data", "col_scale")
    ROW_BLOBS, COLUMN_BLOBS = False, True
    # Minimal bytes: X read once; the column blobs (24 data bytes and one scale byte per 32
    # elements) written once.
    BYTES = "2*T*C (x) + C*(T/32)*24 (column data) + C*T/32 (column scales)"

    def min_bytes(self):
        T, C = self.T, self.C
        return 2 * T * C + C * (T // 32) * 24 + C * T // 32

    def alloc_outputs(self):
        x = self.args[0]
        return (torch.empty(self.C, self.T * 3 // 4, device=x.device, dtype=torch.uint8),
                torch.empty(self.C, self.T // 32, device=x.device, dtype=torch.uint8))


class MxPackDual(MxPackCols):
    """MXFP6 dual packing of X[T, C] (T % 32 == 0): row and column blobs from one read of X, in
    that order (row data [T, 3C/4], row scales [T, C/32], column data [C, 3T/4], column scales
    [C, T/32]). Checked bit for bit against mxfp6_pack_rows_torch of X and of X^T."""
    kernel = "mxfp6_pack_dual"
    what = "dual"
    torch_fn = staticmethod(mxfp6_pack_dual_torch_chunked)
    compile_fn = staticmethod(mxfp6_pack_dual_torch)
    OUTPUTS = ("row_data", "row_scale", "col_data", "col_scale")
    ROW_BLOBS, COLUMN_BLOBS = True, True
    # Minimal bytes: X read once; both blob sets written once.
    BYTES = "2*T*C (x) + 2*(T*3*C/4 + T*C/32) (row blobs, and the same bytes of column blobs)"

    def min_bytes(self):
        T, C = self.T, self.C
        return 2 * T * C + 2 * (T * C * 3 // 4 + T * C // 32)

    def alloc_outputs(self):
        return MxPackRows.alloc_outputs(self) + MxPackCols.alloc_outputs(self)


class NormRopeQkvBwdPack(NormRopeQkvBwd):
    """The packer prologue (docs/architecture.md section 4.4, kernels_dsl/norm_rope_bwd_pack.mxk): the
    whole-QKV norm+RoPE backward fused into the dual MXFP6 packing of d(mixed_qkv) [T, C = 3*H*128],
    Megatron layout, the inputs of NormRopeQkvBwd. Ours is norm_rope_qkv_bwd_pack (row and column
    blobs, token-major column scales, and fp32 dw partials per 32-token block and head: P = T/32 *
    H), mxfp6_scales_transpose of the column scales, then norm_rope_dw_reduce launches (the P
    partials in a fixed order, a tree), timed as one. The baselines run the unfused
    sequence -- the whole-QKV backward writing d(mixed_qkv), the dual packer reading it back -- and
    also return that d(mixed_qkv).

    Checks: the bf16 d(mixed_qkv) behind the blobs and dw within the whole-QKV backward's bounds
    (NormRopeQkvBwd.check; ours at depth 32 + the tree's depth), and the blobs bit for bit against
    mxfp6_pack_rows_torch of that d(mixed_qkv) and of its transpose. That d(mixed_qkv) is the
    implementation's own: a baseline's, or for ours the _bf16 twin's at the same schedule (run
    once, untimed), whose blobs ours must also equal byte for byte."""
    kernel = "norm_rope_qkv_bwd_pack"
    twin_op = "norm_rope_qkv_bwd_pack_bf16"
    BF16_OUT = False
    torch_fn = staticmethod(norm_rope_qkv_bwd_pack_torch)
    compile_fn = staticmethod(norm_rope_qkv_bwd_pack_torch_whole)
    copy_target = 0.75  # docs/architecture.md section 8: the prologue packer
    SAMPLE_BLOCKS = 256
    # Minimal bytes: what the math reads once -- dq, dk, dv, the Q and K parts of mixed_qkv (the
    # kernel reads no V: d(V) is dv), both rstd, the two weights, the Q and K tables -- and what it
    # writes once: the row and column blobs of d(mixed_qkv) and dw.
    BYTES = ("3*R*128*2 (dq, dk, dv) + 2*R*128*2 (Q, K of mixed_qkv) + 2*R*4 (rstd) + 2*128*2 (weights) + "
             "4*S*64*4 (tables; 2*S*64*4 where Q and K share one) + 2*(T*3*C/4 + T*C/32) (row and column blobs of d(mixed_qkv)) + 2*128*4 (dw), "
             "R = T*H, C = 3*H*128; the dw partials (2*(T/32)*H*128*4 bytes written, then read back by the "
             "reduction) are overhead, not counted")

    def __init__(self, rows, fmt, mode="RCEIL", layout="megatron", sequence_major=False, shared_table=False):
        super().__init__(rows, layout, sequence_major, shared_table)
        assert self.T % 32 == 0, "tokens in blocks of 32"
        assert fmt in mxfp6_spec.FORMATS and mode in mxfp6_spec.MODES
        self.fmt, self.mode = fmt, mode
        self.variant = f"FMT={fmt},MODE={mode}"  # any token layout: the op reads the strides of the call's views
        self.C = 3 * self.heads * HEAD_DIM
        self.partials = self.T // 32 * self.heads
        self.family = (f"norm+RoPE bwd + dual MXFP6 pack{' + bf16 d(mixed_qkv)' if self.BF16_OUT else ''} "
                       f"{fmt} {mode}")
        self.name = f"{self.kernel}:{fmt}:rows={rows}:{layout}{self.order_suffix}{self.table_suffix}"
        self.shape = {**self.shape, "C": self.C, "format": fmt, "scale_mode": mode, "partials": self.partials}

    def min_bytes(self):
        R, T, C = self.rows, self.T, self.C
        return (3 * R * HEAD_DIM * 2 + 2 * R * HEAD_DIM * 2 + 2 * R * 4 + 2 * HEAD_DIM * 2 + self.table_bytes()
                + 2 * (T * C * 3 // 4 + T * C // 32) + 2 * HEAD_DIM * 4
                + (3 * R * HEAD_DIM * 2 if self.BF16_OUT else 0))

    def make(self, device, seed):
        super().make(device, seed)
        self.args = self.args + (self.fmt, self.mode)

    def alloc_outputs(self, twin=False):
        """Row data [T, 3C/4], row scales [T, C/32], column data [C, 3T/4] (= [C, T/32, 24]), column
        scales [C, T/32], dw [2, 128] f32, and with the bf16 output (this op's, or its twin's)
        d(mixed_qkv) in qkv's layout."""
        dev, T, C = self.mixed.device, self.T, self.C
        u8 = lambda *shape: torch.empty(*shape, device=dev, dtype=torch.uint8)
        outs = (u8(T, C * 3 // 4), u8(T, C // 32), u8(C, T * 3 // 4), u8(C, T // 32),
                torch.empty(2, HEAD_DIM, device=dev, dtype=F32))
        if self.BF16_OUT or twin:
            outs += (self._view(torch.empty_like(self.mixed)),)
        return outs

    def call(self, outs):
        """The blobs, dw, and d(mixed_qkv) where the outputs hold it (the _bf16 op's, the twin's)."""
        blobs = list(zip(("row_data", "row_scales", "col_data", "col_scales"), outs[:4]))
        dqkv = [("dqkv", outs[5])] if len(outs) > 5 else []
        return self.inputs() + blobs + [("dw", outs[4])] + dqkv, {"pos_div": self.pos_div}

    def check_of(self, plan, twinned=False):
        """At depth 32 + the tree's; without bf16 output, only where the _bf16 twin at the same
        plan gives the d(mixed_qkv) to check against."""
        if self.BF16_OUT or twinned:
            return functools.partial(self.check, depth=32 + tree_depth(self.T // 32 * self.heads))
        return lambda outs, twin_outs=None: Unchecked(
            f"no {self.twin_op} code objects at this plan's configs, whose bf16 d(mixed_qkv) and blobs this plan's "
            "are checked against")

    def check(self, outs, twin_outs=None, depth=None):
        """outs: row data, row scales, column data, column scales, dw, and d(mixed_qkv) where the
        implementation gives it (the _bf16 kernel, every baseline); else twin_outs, the _bf16
        twin's outputs, give it, and ours' blobs must also equal the twin's."""
        if len(outs) > 5:
            dqkv = outs[5]
        elif twin_outs is not None:
            dqkv = twin_outs[5]
        else:
            return Unchecked("no bf16 d(mixed_qkv) to check the blobs against")
        backward = NormRopeQkvBwd.check(self, (dqkv, outs[4]), depth)
        blobs, validation = _blobs_reference(mixed_matrix(dqkv), self.fmt, self.mode, True, True, self.SAMPLE_BLOCKS)
        pack = PackCheck(validation)
        for name, out, ref in zip(MxPackDual.OUTPUTS, outs[:4], blobs):
            pack.compare(name, out, ref)
        del blobs
        if len(outs) <= 5:
            for name, out, ref in zip(MxPackDual.OUTPUTS, outs[:4], twin_outs[:4]):
                pack.compare(f"{name}_vs_bf16_twin", out, ref)
        return Checks(backward=backward, blobs=pack)


class NormRopeQkvBwdPackBf16(NormRopeQkvBwdPack):
    """The packer prologue also writing the bf16 d(mixed_qkv) (in mixed_qkv's layout): that output
    within the whole-QKV backward's bounds, the blobs bit for bit against the encoder of it."""
    kernel = "norm_rope_qkv_bwd_pack_bf16"
    twin_op = None
    BF16_OUT = True
    # Minimal bytes: the prologue's, and the bf16 d(mixed_qkv) written once.
    BYTES = ("3*R*128*2 (dq, dk, dv) + 2*R*128*2 (Q, K of mixed_qkv) + 2*R*4 (rstd) + 2*128*2 (weights) + "
             "4*S*64*4 (tables; 2*S*64*4 where Q and K share one) + 2*(T*3*C/4 + T*C/32) (row and column blobs of d(mixed_qkv)) + 2*128*4 (dw) + "
             "3*R*128*2 (bf16 d(mixed_qkv)), R = T*H, C = 3*H*128; the dw partials (2*(T/32)*H*128*4 bytes "
             "written, then read back by the reduction) are overhead, not counted")


def _has_pack(objects, cls, cols, fmt, mode="RCEIL"):
    """Whether a code object of the packer at this width, format and mode is at hand."""
    want = {"C": cols, "FMT": mxfp6_spec.FMT_INDEX[fmt], "MODE": mxfp6_spec.MODE_INDEX[mode]}
    return any(all(meta.get("config", {}).get(k) == v for k, v in want.items()) for _, meta in objects.get(cls.kernel, []))


PACK_WIDTHS = (3072, 9216, 12288, 21504)


def plan(objects=None):
    """Every (kernel, variant, shape), the shapes the targets apply to (T >= 16384) first, so a run
    cut short by its time budget still has them: T = 16384, then 32768, for every kernel; then the
    wider packer operands; then T = 4096, the 196608-row norm+RoPE shapes, and last the wider packer
    operands at T = 4096. LN-modulate (fwd, bwd; per-sample modulation with [B, S, D] tokens, and at
    T >= 16384 also [S, B, D]; per-token modulation) at T = 4096, 16384, 32768 (B = T/512);
    norm+RoPE at QK rows 98304 .. 786432 = T*24 heads (whole-QKV in both layouts, per-tensor on
    the K slice; at T >= 16384 also sequence-major [S, B] tokens; the backwards likewise, and
    the packer prologue in both formats, the prologue at T >= 16384 also with one rotary table
    for Q and K, and at 98304 rows last); the row, column and dual packers (E3M2 and E2M3) at
    T x C, C = 3072 and, where their code objects were built (objects: {kernel: [(path, meta)]};
    None: all), 9216, 12288, 21504."""
    def packs(T, widths):
        return [cls(T, C, fmt) for cls in (MxPackRows, MxPackCols, MxPackDual) for C in widths
                for fmt in ("E3M2", "E2M3") if C == 3072 or objects is None or _has_pack(objects, cls, C, fmt)]

    def prologues(rows, variants=False):
        """Both kernels and formats in the Megatron layout; with variants, also the blocked layout and
        sequence-major tokens (E3M2, the kernel without bf16 output)."""
        items = [cls(rows, fmt) for cls in (NormRopeQkvBwdPack, NormRopeQkvBwdPackBf16) for fmt in ("E3M2", "E2M3")]
        if variants:
            items += [NormRopeQkvBwdPack(rows, "E3M2", layout="blocked"),
                      NormRopeQkvBwdPack(rows, "E3M2", sequence_major=True),
                      NormRopeQkvBwdPack(rows, "E3M2", shared_table=True)]
        return items

    items = []
    for T in (16384, 32768):
        R = T * 24
        items += ([LnModulate(T), LnModulate(T, layout="sbd"), LnModulatePerToken(T),
                   NormRopeQkv(R, "megatron"), NormRopeQkv(R, "blocked"), NormRopeQkv(R, "megatron", sequence_major=True),
                   NormRopeSlice(R), NormRopeSlice(R, sequence_major=True),
                   LnModulateBwd(T), LnModulateBwd(T, layout="sbd"), LnModulateBwdPerToken(T),
                   NormRopeQkvBwd(R), NormRopeQkvBwd(R, "blocked"), NormRopeSliceBwd(R)]
                  + packs(T, (3072,)) + prologues(R, variants=True))
    for T in (16384, 32768):
        items += packs(T, PACK_WIDTHS[1:])
    items += [LnModulate(4096), LnModulatePerToken(4096), NormRopeQkv(98304, "megatron"),
              NormRopeQkv(98304, "blocked"), NormRopeSlice(98304), LnModulateBwd(4096),
              LnModulateBwdPerToken(4096), NormRopeQkvBwd(98304), NormRopeSliceBwd(98304)] + packs(4096, PACK_WIDTHS[:1])
    items += [NormRopeQkv(196608, "megatron"), NormRopeQkv(196608, "blocked"), NormRopeSlice(196608),
              NormRopeQkvBwd(196608), NormRopeSliceBwd(196608)] + prologues(196608)
    return items + packs(4096, PACK_WIDTHS[1:]) + prologues(98304)
