"""The calls of every op: each builder checks what Python must (tensors, devices, the shapes it
derives the call from), allocates the outputs through PyTorch (or takes `out`) and returns the
Call with its outputs. Names are the op call's (docs/architecture.md, "Ops"); the argument names
in errors are the Python API's.
"""

from ._launch import Call, View, fail, tensor

HEAD_DIM = 128
FORMATS = ("E3M2", "E2M3")
MODES = ("RCEIL", "EVEN", "FLOOR")
LAYOUTS_QKV = ("megatron", "blocked")
LAYOUTS_TOKENS = ("bsd", "sbd")


def _empty(shape, dtype, device, strides=None):
    import torch
    if strides is None:
        return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=device)
    return torch.empty_strided(tuple(shape), tuple(strides), dtype=getattr(torch, dtype), device=device)


def _dqkv(public, call, out, T, H, strides, device):
    """Binds d(mixed_qkv) as [T, 3, H, 128]. The kernels read mixed_qkv and write its gradient with
    one token stride (qkv_token_stride), so a new gradient takes mixed_qkv's: a slice of a wider
    projection (Flux's single block: QKV and the MLP input from one linear) gets a gradient with
    that width's row stride, over the same [T, 3*H*128]."""
    t = tensor(public, "d(mixed_qkv)", out, device)
    token_stride = t.stride()[0] if T > 1 else strides[0]
    call.tensor("dqkv", View(t, (T, 3, H, HEAD_DIM), (token_stride,) + tuple(strides[1:])), "d(mixed_qkv)")


def _new_dqkv(T, H, strides, device):
    return _empty((T, 3 * H * HEAD_DIM), "bfloat16", device, (strides[0], 1))


def _outputs(public, call, names, shapes, device, out):
    """Binds the outputs: `out` when given (checked by the C ABI like any argument), else new."""
    if out is None:
        out = [_empty(shape, dtype, device) for shape, dtype in shapes]
    elif len(out) != len(names):
        fail(public, f"'out' must hold {len(names)} tensors ({', '.join(names)}), got {len(out)}")
    for n, t in zip(names, out):
        call.tensor(n, tensor(public, n, t, device))
    return list(out)


def _choice(public, name, value, allowed):
    if value not in allowed:
        fail(public, f"argument '{name}' must be one of {', '.join(repr(a) for a in allowed)}, got {value!r}")


def _pos_div_eps(public, pos_div, eps):
    if int(pos_div) < 1:
        fail(public, f"argument 'pos_div' must be >= 1, got {pos_div}")
    if eps is not None and not eps > 0:
        fail(public, f"argument 'eps' must be > 0, got {eps}")


# whole-QKV norm+RoPE -----------------------------------------------------------------------

def qkv_shape(public, mixed_qkv, layout):
    """T, H and the [T, 3, H, 128] strides of mixed_qkv ([T, 3*H*128], unit column stride)."""
    tensor(public, "mixed_qkv", mixed_qkv)
    _choice(public, "layout", layout, LAYOUTS_QKV)
    if len(mixed_qkv.shape) != 2 or mixed_qkv.shape[1] % (3 * HEAD_DIM) != 0 or mixed_qkv.shape[1] == 0:
        fail(public, f"argument 'mixed_qkv' must be [T, 3*H*{HEAD_DIM}], got {list(mixed_qkv.shape)}")
    if mixed_qkv.stride()[1] != 1:
        fail(public, f"argument 'mixed_qkv' must have unit stride along its columns, got strides "
                     f"{list(mixed_qkv.stride())}")
    T, H = mixed_qkv.shape[0], mixed_qkv.shape[1] // (3 * HEAD_DIM)
    t0 = mixed_qkv.stride()[0] if T > 1 else 3 * H * HEAD_DIM
    strides = (t0, HEAD_DIM, 3 * HEAD_DIM, 1) if layout == "megatron" else (t0, H * HEAD_DIM, HEAD_DIM, 1)
    return T, H, strides


def _qkv_inputs(public, call, mixed_qkv, layout, q_weight, k_weight, cos, sin, k_cos, k_sin, name="qkv",
                python_name="mixed_qkv"):
    T, H, strides = qkv_shape(public, mixed_qkv, layout)
    device = mixed_qkv.device
    if (k_cos is None) != (k_sin is None):
        fail(public, "arguments 'k_cos' and 'k_sin' go together: give both (K's own table) or neither (Q's)")
    call.tensor(name, View(mixed_qkv, (T, 3, H, HEAD_DIM), strides), python_name)
    for n, t in (("q_weight", q_weight), ("k_weight", k_weight)):
        call.tensor(n, tensor(public, n, t, device))
    own = k_cos is not None
    for n, t, py in (("q_cos", cos, "cos"), ("q_sin", sin, "sin"), ("k_cos", k_cos if own else cos, "k_cos" if own else "cos"),
                     ("k_sin", k_sin if own else sin, "k_sin" if own else "sin")):
        call.tensor(n, tensor(public, py, t, device), py)
    return T, H, strides, device


def qkv_fwd(mixed_qkv, q_weight, k_weight, cos, sin, k_cos=None, k_sin=None, layout="megatron", pos_div=1, eps=1e-6,
            out=None):
    """-> [q, k, v (each [T, H, 128] bf16), q_rstd, k_rstd ([T, H] f32)]."""
    public = "norm_rope"
    _pos_div_eps(public, pos_div, eps)
    call = Call("norm_rope_qkv_fwd", public, f"layout={layout}")
    T, H, _, device = _qkv_inputs(public, call, mixed_qkv, layout, q_weight, k_weight, cos, sin, k_cos, k_sin)
    out = _outputs(public, call, ("q", "k", "v", "q_rstd", "k_rstd"),
                   [((T, H, HEAD_DIM), "bfloat16")] * 3 + [((T, H), "float32")] * 2, device, out)
    call.scalar("pos_div", int(pos_div))
    call.scalar("eps", eps)
    return call, out


def _qkv_grads(public, call, dq, dk, dv, device):
    for n, t in (("dq", dq), ("dk", dk), ("dv", dv)):
        call.tensor(n, tensor(public, n, t, device))


def qkv_bwd(dq, dk, dv, mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, q_rstd, k_rstd, layout, pos_div,
            out=None):
    """-> [d(mixed_qkv) (mixed_qkv's shape and row stride), dw ([2, 128] f32: q's, k's)]."""
    public = "norm_rope (backward)"
    _pos_div_eps(public, pos_div, None)
    call = Call("norm_rope_qkv_bwd", public, f"layout={layout}")
    T, H, strides, device = _qkv_inputs(public, call, mixed_qkv, layout, q_weight, k_weight, cos, sin, k_cos, k_sin)
    _qkv_grads(public, call, dq, dk, dv, device)
    call.tensor("q_rstd", tensor(public, "q_rstd", q_rstd, device))
    call.tensor("k_rstd", tensor(public, "k_rstd", k_rstd, device))
    if out is None:
        out = [_new_dqkv(T, H, strides, device), _empty((2, HEAD_DIM), "float32", device)]
    _dqkv(public, call, out[0], T, H, strides, device)
    call.tensor("dw", tensor(public, "dw", out[1], device))
    call.scalar("pos_div", int(pos_div))
    return call, out


def packed_shapes(T, C, along):
    """The blobs of packing a [T, C] bf16 tensor (docs/mxfp6-format.md): rows, cols, or both."""
    rows = [("data", (T, C * 3 // 4)), ("scales", (T, C // 32))]
    cols = [("data", (C, T * 3 // 4)), ("scales", (C, T // 32))]
    return {"rows": rows, "cols": cols,
            "dual": [("row_" + n, s) for n, s in rows] + [("col_" + n, s) for n, s in cols]}[along]


def qkv_bwd_pack(dq, dk, dv, mixed_qkv, q_weight, k_weight, cos, sin, k_cos, k_sin, q_rstd, k_rstd, layout, pos_div,
                 fmt, mode, with_bf16, blobs, out=None):
    """The packer prologue: the whole-QKV backward fused into the dual MXFP6 packing of
    d(mixed_qkv) [T, C = 3*H*128] into `blobs` (row_data, row_scales, col_data, col_scales), T a
    multiple of 32. -> [dw, d(mixed_qkv) when with_bf16]."""
    public = "norm_rope (packed backward)"
    _choice(public, "fmt", fmt, FORMATS)
    _choice(public, "mode", mode, MODES)
    op = "norm_rope_qkv_bwd_pack_bf16" if with_bf16 else "norm_rope_qkv_bwd_pack"
    call = Call(op, public, f"FMT={fmt},MODE={mode}")
    T, H, strides, device = _qkv_inputs(public, call, mixed_qkv, layout, q_weight, k_weight, cos, sin, k_cos, k_sin)
    _qkv_grads(public, call, dq, dk, dv, device)
    call.tensor("q_rstd", tensor(public, "q_rstd", q_rstd, device))
    call.tensor("k_rstd", tensor(public, "k_rstd", k_rstd, device))
    for (n, _), t in zip(packed_shapes(T, 3 * H * HEAD_DIM, "dual"), blobs):
        call.tensor(n, tensor(public, n, t, device))
    if out is None:
        out = [_empty((2, HEAD_DIM), "float32", device)]
        if with_bf16:
            out.append(_new_dqkv(T, H, strides, device))
    call.tensor("dw", tensor(public, "dw", out[0], device))
    if with_bf16:
        _dqkv(public, call, out[1], T, H, strides, device)
    call.scalar("pos_div", int(pos_div))
    return call, out


# per-tensor norm+RoPE ----------------------------------------------------------------------

def _heads_shape(public, x):
    tensor(public, "x", x)
    if len(x.shape) != 3 or x.shape[2] != HEAD_DIM:
        fail(public, f"argument 'x' must be [T, H, {HEAD_DIM}], got {list(x.shape)}")
    return x.shape[0], x.shape[1]


def heads_fwd(x, weight, cos, sin, pos_div, eps, out=None):
    """Per-tensor norm+RoPE of a [T, H, 128] view (any token and head strides) -> [y, rstd]."""
    public = "norm_rope_heads"
    _pos_div_eps(public, pos_div, eps)
    T, H = _heads_shape(public, x)
    device = x.device
    call = Call("norm_rope_fwd", public)
    call.tensor("x", x)
    for n, t in (("weight", weight), ("cos", cos), ("sin", sin)):
        call.tensor(n, tensor(public, n, t, device))
    out = _outputs(public, call, ("y", "rstd"), [((T, H, HEAD_DIM), "bfloat16"), ((T, H), "float32")], device, out)
    call.scalar("pos_div", int(pos_div))
    call.scalar("eps", eps)
    return call, out


def heads_bwd(dy, x, weight, cos, sin, rstd, pos_div, out=None):
    """-> [dx ([T, H, 128] bf16, contiguous), dw ([128] f32)]."""
    public = "norm_rope_heads (backward)"
    _pos_div_eps(public, pos_div, None)
    T, H = _heads_shape(public, x)
    device = x.device
    call = Call("norm_rope_bwd", public)
    call.tensor("dy", tensor(public, "dy", dy, device))
    call.tensor("x", x)
    for n, t in (("weight", weight), ("cos", cos), ("sin", sin), ("rstd", rstd)):
        call.tensor(n, tensor(public, n, t, device))
    out = _outputs(public, call, ("dx", "dw"), [((T, H, HEAD_DIM), "bfloat16"), ((HEAD_DIM,), "float32")], device, out)
    call.scalar("pos_div", int(pos_div))
    return call, out


# LN-modulate -------------------------------------------------------------------------------

def _tokens(public, x, tokens_per_sample, layout, eps):
    """B (samples; None per token) of an [T, D] x."""
    tensor(public, "x", x)
    if len(x.shape) != 2:
        fail(public, f"argument 'x' must be [T, D], got {list(x.shape)}")
    if eps is not None and not eps > 0:
        fail(public, f"argument 'eps' must be > 0, got {eps}")
    if tokens_per_sample is None:
        return None
    _choice(public, "layout", layout, LAYOUTS_TOKENS)
    S = int(tokens_per_sample)
    if S < 1 or x.shape[0] % S != 0:
        fail(public, f"argument 'tokens_per_sample' ({tokens_per_sample}) must divide the {x.shape[0]} tokens of 'x'")
    return x.shape[0] // S


def _ln_call(public, op, x, tokens_per_sample, layout, eps):
    """(B, call) of an LN-modulate op on x: per sample (B samples, the op with its layout) when
    tokens_per_sample is given, else per token (B None, the op's _per_token twin)."""
    B = _tokens(public, x, tokens_per_sample, layout, eps)
    if B is None:
        return None, Call(op + "_per_token", public)
    return B, Call(op, public, f"layout={layout}")


def ln_fwd(x, scale, shift, tokens_per_sample, layout="bsd", eps=1e-6, out=None):
    """y = LN(x) * (1 + scale) + shift, per sample (scale, shift [B, D]; tokens_per_sample given) or
    per token (scale, shift [T, D]; tokens_per_sample None) -> [y, mean, rstd]."""
    public = "ln_modulate"
    B, call = _ln_call(public, "ln_modulate_fwd", x, tokens_per_sample, layout, eps)
    device = x.device
    call.tensor("x", x)
    call.tensor("scale", tensor(public, "scale", scale, device))
    call.tensor("shift", tensor(public, "shift", shift, device))
    T = x.shape[0]
    out = _outputs(public, call, ("y", "mean", "rstd"),
                   [(tuple(x.shape), "bfloat16"), ((T,), "float32"), ((T,), "float32")], device, out)
    if B is not None:
        call.scalar("tokens_per_sample", int(tokens_per_sample))
    call.scalar("eps", eps)
    return call, out


def ln_bwd(g, x, scale, mean, rstd, tokens_per_sample, layout, out=None):
    """-> [dx, dscale, dshift] (dscale, dshift shaped like scale)."""
    public = "ln_modulate (backward)"
    B, call = _ln_call(public, "ln_modulate_bwd", x, tokens_per_sample, layout, None)
    device = x.device
    call.tensor("g", tensor(public, "g", g, device))
    call.tensor("x", x)
    for n, t in (("scale", scale), ("mean", mean), ("rstd", rstd)):
        call.tensor(n, tensor(public, n, t, device))
    T, D = x.shape
    rows = T if B is None else B
    out = _outputs(public, call, ("dx", "dscale", "dshift"),
                   [((T, D), "bfloat16"), ((rows, D), "bfloat16"), ((rows, D), "bfloat16")], device, out)
    if B is not None:
        call.scalar("tokens_per_sample", int(tokens_per_sample))
    return call, out


# MXFP6 packers -----------------------------------------------------------------------------

def pack(x, fmt, mode, along, out=None):
    """MXFP6 packing of x [T, C] bf16 along rows, columns or both -> the blobs, in packed_shapes'
    order (u8)."""
    public = "pack"
    tensor(public, "x", x)
    _choice(public, "fmt", fmt, FORMATS)
    _choice(public, "mode", mode, MODES)
    _choice(public, "along", along, ("rows", "cols", "dual"))
    if len(x.shape) != 2 or x.shape[1] % 32 != 0:
        fail(public, f"argument 'x' must be [T, C] with C a multiple of 32, got {list(x.shape)}")
    if along != "rows" and x.shape[0] % 32 != 0:
        fail(public, f"packing along columns needs the rows of 'x' to be a multiple of 32, got {x.shape[0]}")
    call = Call({"rows": "mxfp6_pack_rows", "cols": "mxfp6_pack_cols", "dual": "mxfp6_pack_dual"}[along], public,
                f"FMT={fmt},MODE={mode}")
    call.tensor("x", x)
    shapes = packed_shapes(x.shape[0], x.shape[1], along)
    out = _outputs(public, call, [n for n, _ in shapes], [(s, "uint8") for _, s in shapes], x.device, out)
    return call, out
