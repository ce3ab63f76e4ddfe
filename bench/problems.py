"""The benchmarked problems, one class per kernel: inputs, the PyTorch implementation (eager, and
what torch.compile compiles), the fp64 check every implementation must pass, the minimal bytes,
and the values of our kernel's launch ABI. Semantics: DESIGN.md section 6; kernels_dsl/*.mxk.

Each implementation is called as fn(*problem.args) and returns the outputs in the kernel's order.
Inputs are random (never zeros, which can hide unwritten outputs and run faster than real data),
drawn like the GPU tests' (tests/gpu/*_gpu_test.cpp), and fresh for every shape.
"""
import torch

BF16, F32, F64 = torch.bfloat16, torch.float32, torch.float64
# eps as every implementation sees it: the f32 nearest 1e-6, so the fp64 check uses the same value.
EPS = float(torch.tensor(1e-6, dtype=F32))
STATS_REL_BOUND = 1e-5  # mean / rstd relative error, as in the GPU tests
HEAD_DIM, PAIRS = 128, 64


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


def _norm_rope_rows(x, weight, cos, sin, pos_div, eps):
    """RMSNorm + interleaved RoPE of a [T, H, 128] view (any strides): y bf16 contiguous, rstd f32."""
    T, H, Dh = x.shape
    S = cos.shape[0]
    xf = x.float()
    rstd = torch.rsqrt(xf.square().mean(-1) + eps)
    n = xf * rstd[..., None] * weight.float()
    if pos_div == 1 and T % S == 0:  # batch-major whole samples: the table broadcasts, no gather
        n = n.reshape(T // S, S, H, Dh // 2, 2)
        c, s = cos.view(1, S, 1, -1), sin.view(1, S, 1, -1)
    else:
        pos = torch.div(torch.arange(T, device=x.device), pos_div, rounding_mode="floor") % S
        n = n.reshape(T, H, Dh // 2, 2)
        c, s = cos[pos][:, None], sin[pos][:, None]
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

    def rounded(self, out, ref, terms):
        """out: bf16 result; ref: its fp64 value; terms(): the addends' magnitudes (built lazily)."""
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
            bound = 0.5 * ulp_bf16(ref) + terms() * 2.0 ** -20
            frac = torch.where(beyond, err / bound, torch.zeros_like(err))
            self.max_bound_fraction = max(self.max_bound_fraction, float(frac.max()))
            self.beyond_bound += int((beyond & (err > bound)).sum())

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


class LnModulate:
    """LN-modulate forward, per-sample modulation, tokens [B, S, D] batch-major (sample_div = S)."""
    kernel = "ln_modulate_fwd"
    family = "LN-modulate fwd"
    torch_fn = staticmethod(ln_modulate_fwd_torch)
    D = 3072
    # Minimal bytes: x read once, scale and shift read once each (B rows), y, mean, rstd written once.
    BYTES = "2*T*D (x) + 2*2*B*D (scale, shift) + 2*T*D (y) + 2*4*T (mean, rstd)"

    def __init__(self, tokens, tokens_per_sample=512):
        assert tokens % tokens_per_sample == 0, "whole samples"
        self.T, self.S, self.B = tokens, tokens_per_sample, tokens // tokens_per_sample
        self.tokens, self.rows = tokens, tokens
        self.label = f"T={tokens}"
        self.name = f"{self.kernel}:{self.label}"
        self.shape = {"T": tokens, "B": self.B, "S": tokens_per_sample, "D": self.D}

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
        self.args = (x.to(BF16), scale.to(BF16), shift.to(BF16), self.S, EPS)  # sample_div = S

    def alloc_outputs(self):
        x = self.args[0]
        return (torch.empty_like(x), torch.empty(self.T, device=x.device, dtype=F32),
                torch.empty(self.T, device=x.device, dtype=F32))

    def abi_values(self, outs):
        x, scale, shift, sample_div, eps = self.args
        y, mean, rstd = outs
        return {"x": x, "scale": scale, "shift": shift, "y": y, "mean": mean, "rstd": rstd,
                "sample_div": sample_div, "eps": eps, "T": self.T, "B": self.B, "D": self.D}

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


class _NormRopeBase:
    heads = 24
    positions = 512  # S: tokens per sample; batch-major tokens, so pos_div = 1

    def __init__(self, rows):
        assert rows % self.heads == 0
        self.T = rows // self.heads
        self.tokens, self.rows = self.T, rows

    def _mixed_qkv(self, g, device):
        """mixed_qkv [T, 3*H*128] bf16: rows of 128 with per-row spreads, so rstd varies."""
        T, H = self.T, self.heads
        spread = 0.25 + 3.75 * torch.rand(T * 3 * H, 1, generator=g, device=device)
        rows = torch.randn(T * 3 * H, HEAD_DIM, generator=g, device=device) * spread
        return rows.to(BF16).view(T, 3 * H * HEAD_DIM)

    def _weight(self, g, device):
        return (1 + 0.2 * torch.randn(HEAD_DIM, generator=g, device=device)).to(BF16)

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

    def __init__(self, rows, layout):
        super().__init__(rows)
        assert layout in ("megatron", "blocked")
        self.layout = layout
        self.label = f"rows={rows} {layout}"
        self.name = f"{self.kernel}:rows={rows}:{layout}"
        self.shape = {"rows": rows, "T": self.T, "H": self.heads, "S": self.positions, "layout": layout}

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
        self.args = (qkv, self._weight(g, device), self._weight(g, device), q_cos, q_sin, k_cos, k_sin, 1, EPS)

    def alloc_outputs(self):
        m = self.mixed
        return tuple(self._empty_rows(BF16, m) for _ in range(3)) + tuple(self._empty_rows(F32, m) for _ in range(2))

    def abi_values(self, outs):
        qkv, qw, kw, qc, qs, kc, ks, pos_div, eps = self.args
        q, k, v, qr, kr = outs
        return {"qkv": qkv, "q_weight": qw, "k_weight": kw, "q_cos": qc, "q_sin": qs, "k_cos": kc, "k_sin": ks,
                "q": q, "k": k, "v": v, "q_rstd": qr, "k_rstd": kr,
                "qkv_token_stride": qkv.stride(0), "qkv_part_stride": qkv.stride(1),
                "qkv_head_stride": qkv.stride(2), "pos_div": pos_div, "eps": eps,
                "T": self.T, "H": self.heads, "S": self.positions}

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

    def __init__(self, rows):
        super().__init__(rows)
        self.label = f"rows={rows} K of megatron"
        self.name = f"{self.kernel}:rows={rows}"
        self.shape = {"rows": rows, "T": self.T, "H": self.heads, "S": self.positions, "layout": "megatron K slice"}

    def min_bytes(self):
        R, S = self.rows, self.positions
        return R * HEAD_DIM * 2 + HEAD_DIM * 2 + 2 * S * PAIRS * 4 + R * HEAD_DIM * 2 + R * 4

    def make(self, device, seed):
        g, T, H = _generator(device, seed), self.T, self.heads
        self.mixed = self._mixed_qkv(g, device)
        x = self.mixed.view(T, H, 3, HEAD_DIM)[:, :, 1]  # strides (3*H*128, 3*128, 1)
        cos, sin = _rope_table(self.positions, g, device)
        self.args = (x, self._weight(g, device), cos, sin, 1, EPS)

    def alloc_outputs(self):
        return self._empty_rows(BF16, self.mixed), self._empty_rows(F32, self.mixed)

    def abi_values(self, outs):
        x, w, c, s, pos_div, eps = self.args
        y, rstd = outs
        return {"x": x, "weight": w, "rope_cos": c, "rope_sin": s, "y": y, "rstd": rstd,
                "x_token_stride": x.stride(0), "x_head_stride": x.stride(1), "pos_div": pos_div, "eps": eps,
                "T": self.T, "H": self.heads, "S": self.positions}

    def check(self, outs):
        x, w, c, s, pos_div, _ = self.args
        y, rstd = outs
        chk = Check()
        _check_rotated(chk, x, w, c, s, pos_div, y, rstd)
        return chk


def plan():
    """Every (kernel, shape), the shapes the targets apply to (T >= 16384) first, so a run cut short
    by its time budget still has them. LN-modulate at T = 4096, 16384, 32768 (B = T/512); norm+RoPE
    at QK rows 98304 .. 786432 = T*24 heads."""
    items = []
    for T in (16384, 32768, 4096, 8192):
        if T != 8192:
            items.append(LnModulate(T))
        items += [NormRopeQkv(T * 24, "megatron"), NormRopeQkv(T * 24, "blocked"), NormRopeSlice(T * 24)]
    return items
