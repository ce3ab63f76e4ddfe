"""BASELINE, not mxfp6c: hand-written Triton versions of the benchmarked kernels, the way these
kernels are written today (DESIGN.md section 1), each autotuned over a small config set per shape
(@triton.autotune keyed on the row count and strides). They take the same arguments as the PyTorch
functions in problems.py and return the same outputs; `out=` writes into given tensors instead, so
the harness can poison them first and catch an unwritten element.
"""
import torch
import triton
import triton.language as tl


# ---------------------------------------------------------------------------------------------
# LN-modulate forward: ROWS rows of D per program, the whole row in registers (D = 3072 padded to
# a power of two, masked).

@triton.jit
def _ln_modulate_fwd_kernel(x_ptr, scale_ptr, shift_ptr, y_ptr, mean_ptr, rstd_ptr, T, B, sample_div, eps,
                            D: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    row_ok = rows < T
    mask = row_ok[:, None] & (cols < D)[None, :]
    offs = rows.to(tl.int64)[:, None] * D + cols[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=1) / D
    d = tl.where(mask, x - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=1) / D + eps)
    mod = ((rows // sample_div) % B).to(tl.int64)[:, None] * D + cols[None, :]
    scale = tl.load(scale_ptr + mod, mask=mask, other=0.0).to(tl.float32)
    shift = tl.load(shift_ptr + mod, mask=mask, other=0.0).to(tl.float32)
    y = d * rstd[:, None] * (1.0 + scale) + shift
    tl.store(y_ptr + offs, y.to(tl.bfloat16), mask=mask)
    tl.store(mean_ptr + rows, mean, mask=row_ok)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


_ln_modulate_fwd_tuned = triton.autotune(
    configs=[triton.Config({"ROWS": r}, num_warps=w, num_stages=1)
             for r, w in ((1, 4), (1, 8), (1, 16), (2, 8), (2, 16), (4, 16))],
    key=["T"])(_ln_modulate_fwd_kernel)


def ln_modulate_fwd(x, scale, shift, sample_div, eps, out=None):
    T, D = x.shape
    B = scale.shape[0]
    y, mean, rstd = out or (torch.empty_like(x), torch.empty(T, device=x.device, dtype=torch.float32),
                            torch.empty(T, device=x.device, dtype=torch.float32))
    _ln_modulate_fwd_tuned[lambda meta: (triton.cdiv(T, meta["ROWS"]),)](
        x, scale, shift, y, mean, rstd, T, B, sample_div, eps, D=D, BLOCK_D=triton.next_power_of_2(D))
    return y, mean, rstd


def ln_modulate_fwd_launcher(x, scale, shift, y, mean, rstd, sample_div, eps):
    """A direct launch at one fixed config (no autotuner in the path): what a host-overhead loop
    of a plain Triton launch measures."""
    T, D = x.shape
    B = scale.shape[0]
    grid = (T,)
    block = triton.next_power_of_2(D)
    return lambda: _ln_modulate_fwd_kernel[grid](x, scale, shift, y, mean, rstd, T, B, sample_div, eps,
                                                 D=D, BLOCK_D=block, ROWS=1, num_warps=4)


# ---------------------------------------------------------------------------------------------
# QK RMSNorm + interleaved RoPE forward: ROWS (token, head) rows of 128 per program; rows are
# loaded whole (16-byte accesses) and split into even/odd halves for the rotation.

@triton.jit
def _norm_rope_tile(x_ptr, token_stride, head_stride, w_ptr, cos_ptr, sin_ptr, y_ptr, rstd_ptr,
                    rows, row_ok, H, S, pos_div, eps, ROWS: tl.constexpr):
    t = rows // H
    h = rows % H
    cols = tl.arange(0, 128)
    src = t.to(tl.int64) * token_stride + h.to(tl.int64) * head_stride
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=row_ok[:, None], other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / 128 + eps)
    n = x * rstd[:, None] * tl.load(w_ptr + cols).to(tl.float32)[None, :]
    n0, n1 = tl.split(tl.reshape(n, (ROWS, 64, 2)))
    pos = (t // pos_div) % S
    tab = pos.to(tl.int64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    c = tl.load(cos_ptr + tab, mask=row_ok[:, None], other=0.0)
    s = tl.load(sin_ptr + tab, mask=row_ok[:, None], other=0.0)
    y = tl.reshape(tl.join(c * n0 - s * n1, s * n0 + c * n1), (ROWS, 128))
    tl.store(y_ptr + rows.to(tl.int64)[:, None] * 128 + cols[None, :], y.to(tl.bfloat16), mask=row_ok[:, None])
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@triton.jit
def _norm_rope_fwd_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr, rstd_ptr, token_stride, head_stride,
                          n_rows, H, S, pos_div, eps, ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    _norm_rope_tile(x_ptr, token_stride, head_stride, w_ptr, cos_ptr, sin_ptr, y_ptr, rstd_ptr,
                    rows, rows < n_rows, H, S, pos_div, eps, ROWS)


@triton.jit
def _norm_rope_qkv_fwd_kernel(qkv_ptr, qw_ptr, kw_ptr, qc_ptr, qs_ptr, kc_ptr, ks_ptr, q_ptr, k_ptr, v_ptr,
                              qr_ptr, kr_ptr, token_stride, part_stride, head_stride, n_rows, H, S, pos_div, eps,
                              ROWS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    _norm_rope_tile(qkv_ptr, token_stride, head_stride, qw_ptr, qc_ptr, qs_ptr, q_ptr, qr_ptr,
                    rows, row_ok, H, S, pos_div, eps, ROWS)
    _norm_rope_tile(qkv_ptr + part_stride, token_stride, head_stride, kw_ptr, kc_ptr, ks_ptr, k_ptr, kr_ptr,
                    rows, row_ok, H, S, pos_div, eps, ROWS)
    # V: a bit-exact copy into the contiguous output.
    cols = tl.arange(0, 128)
    src = (rows // H).to(tl.int64) * token_stride + 2 * part_stride + (rows % H).to(tl.int64) * head_stride
    v = tl.load(qkv_ptr + src[:, None] + cols[None, :], mask=row_ok[:, None])
    tl.store(v_ptr + rows.to(tl.int64)[:, None] * 128 + cols[None, :], v, mask=row_ok[:, None])


_NORM_ROPE_CONFIGS = [triton.Config({"ROWS": r}, num_warps=w, num_stages=1)
                      for r, w in ((8, 2), (16, 4), (32, 4), (32, 8), (64, 4), (64, 8))]
_norm_rope_fwd_tuned = triton.autotune(
    configs=_NORM_ROPE_CONFIGS, key=["n_rows", "token_stride", "head_stride"])(_norm_rope_fwd_kernel)
_norm_rope_qkv_fwd_tuned = triton.autotune(
    configs=_NORM_ROPE_CONFIGS, key=["n_rows", "token_stride", "part_stride", "head_stride"])(_norm_rope_qkv_fwd_kernel)


def _rows_out(T, H, like, dtype):
    shape = (T, H, 128) if dtype == torch.bfloat16 else (T, H)
    return torch.empty(shape, device=like.device, dtype=dtype)


def norm_rope_fwd(x, weight, cos, sin, pos_div, eps, out=None):
    T, H, Dh = x.shape
    assert Dh == 128 and x.stride(2) == 1
    y, rstd = out or (_rows_out(T, H, x, torch.bfloat16), _rows_out(T, H, x, torch.float32))
    n_rows = T * H
    _norm_rope_fwd_tuned[lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)](
        x, weight, cos, sin, y, rstd, x.stride(0), x.stride(1), n_rows, H, cos.shape[0], pos_div, eps)
    return y, rstd


def norm_rope_qkv_fwd(qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, pos_div, eps, out=None):
    T, parts, H, Dh = qkv.shape
    assert parts == 3 and Dh == 128 and qkv.stride(3) == 1
    outs = out or (tuple(_rows_out(T, H, qkv, torch.bfloat16) for _ in range(3)) +
                   tuple(_rows_out(T, H, qkv, torch.float32) for _ in range(2)))
    n_rows = T * H
    _norm_rope_qkv_fwd_tuned[lambda meta: (triton.cdiv(n_rows, meta["ROWS"]),)](
        qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, *outs,
        qkv.stride(0), qkv.stride(1), qkv.stride(2), n_rows, H, q_cos.shape[0], pos_div, eps)
    return tuple(outs)


IMPLEMENTATIONS = {
    "ln_modulate_fwd": (ln_modulate_fwd, _ln_modulate_fwd_tuned),
    "norm_rope_fwd": (norm_rope_fwd, _norm_rope_fwd_tuned),
    "norm_rope_qkv_fwd": (norm_rope_qkv_fwd, _norm_rope_qkv_fwd_tuned),
}


def best_config(kernel):
    """The autotuner's choice for the last shape it ran, as a dict."""
    cfg = getattr(IMPLEMENTATIONS[kernel][1], "best_config", None)
    if cfg is None:
        return None
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
