"""The public ops (docs/architecture.md 4.1, 4.2 and 5): argument checks that name the argument,
then the launch, with autograd where the caller will need a backward (python/mxfp6/_autograd.py).
"""

from . import _autograd, _calls


def norm_rope(mixed_qkv, q_weight, k_weight, cos, sin, k_cos=None, k_sin=None, layout="megatron", pos_div=1,
              eps=1e-6, packed_grad=None):
    """QK RMSNorm + interleaved RoPE of a whole mixed_qkv [T, 3*H*128] bf16 (Megatron per-head
    [T, H, 3, 128] or blocked [T, 3, H, 128]) -> q, k, v, each [T, H, 128] bf16 contiguous.

    q_weight, k_weight: [128] bf16. cos, sin: [positions, 64] f32 rotary tables of Q (and of K,
    unless k_cos and k_sin give K its own); token t uses position t // pos_div.

    Backward: d(mixed_qkv) written whole (V's part too) and dq_weight, dk_weight. With
    packed_grad=mxfp6.PackedGrad(...), the backward also packs d(mixed_qkv) to MXFP6 (see
    PackedGrad)."""
    args = (mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, layout, int(pos_div), float(eps))
    if packed_grad is None:
        return _autograd.NORM_ROPE_QKV.run("norm_rope", args)[:3]
    import torch
    T, H, _ = _calls.qkv_shape("norm_rope", mixed_qkv, layout)
    if _autograd._compiling():
        raise NotImplementedError("mxfp6.norm_rope: packed_grad is not supported under torch.compile (eager mode "
                                  "and CUDA graphs only): compile without it, or leave this call out of the graph")
    if not packed_grad.with_bf16 and getattr(mixed_qkv, "requires_grad", False):
        _calls.fail("norm_rope", "packed_grad with with_bf16=False writes no bf16 d(mixed_qkv), so 'mixed_qkv' must "
                                 "not require grad (detach it and consume the packed blobs in your backward)")
    if not (torch.is_grad_enabled() and any(getattr(t, "requires_grad", False) for t in args[:3])):
        _calls.fail("norm_rope", "packed_grad was given to a forward-only call (grad mode off or no input requires "
                                 "grad): there will be no backward to pack")
    packed_grad.allocate(T, 3 * H * _calls.HEAD_DIM, mixed_qkv.device)
    return _autograd.NORM_ROPE_QKV_PACKED.apply(packed_grad, *args)[:3]


def norm_rope_heads(x, weight, cos, sin, pos_div=1, eps=1e-6):
    """Per-tensor QK RMSNorm + interleaved RoPE of x [T, H, 128] bf16 (any token and head strides,
    e.g. Q or K sliced from mixed_qkv) -> y [T, H, 128] bf16 contiguous. Backward: dx, dweight."""
    return _autograd.NORM_ROPE_HEADS.run("norm_rope_heads", (x, weight, cos, sin, int(pos_div), float(eps)))[0]


def ln_modulate(x, scale, shift, tokens_per_sample=None, layout="bsd", eps=1e-6):
    """y = LayerNorm(x) * (1 + scale) + shift of x [T, D] bf16, D = 3072 (docs/architecture.md 4.2).

    Per sample: scale and shift [B, D] bf16, tokens_per_sample = T / B, the tokens ordered [B, S]
    (layout "bsd") or [S, B] ("sbd"). Per token: scale and shift [T, D], tokens_per_sample None.
    Backward: dx, dscale, dshift."""
    n = 0 if tokens_per_sample is None else int(tokens_per_sample)
    if tokens_per_sample is not None and n < 1:
        _calls.fail("ln_modulate", f"argument 'tokens_per_sample' must be >= 1 (or None: per token), got "
                                   f"{tokens_per_sample}")
    return _autograd.LN_MODULATE.run("ln_modulate", (x, scale, shift, n, layout, float(eps)))[0]


class Packed:
    """MXFP6 blobs of a [T, C] tensor (docs/mxfp6-format.md): `rows` = (data [T, C*3/4], scales
    [T, C/32]) for the forward GEMM, `cols` = (data [C, T*3/4], scales [C, T/32]) for the backward
    GEMMs; either is None when not packed."""

    def __init__(self, fmt, mode, rows, cols):
        self.fmt, self.mode, self.rows, self.cols = fmt, mode, rows, cols

    def __repr__(self):
        return f"Packed({self.fmt}, {self.mode}, rows={self.rows is not None}, cols={self.cols is not None})"


def pack(x, fmt="E3M2", mode="RCEIL", along="auto"):
    """MXFP6 packing of x [T, C] bf16 (C a multiple of 32; T too for columns) -> Packed.

    along: "rows", "cols", "dual" (both from one read), or "auto": both when a backward will
    follow (grad mode on and x requires grad: the backward GEMMs need the columns), rows only
    otherwise (evaluation)."""
    if along == "auto":
        import torch
        along = "dual" if torch.is_grad_enabled() and getattr(x, "requires_grad", False) else "rows"
    blobs = _autograd.pack(x, fmt, mode, along)
    if along == "rows":
        return Packed(fmt, mode, tuple(blobs), None)
    if along == "cols":
        return Packed(fmt, mode, None, tuple(blobs))
    return Packed(fmt, mode, tuple(blobs[:2]), tuple(blobs[2:]))
