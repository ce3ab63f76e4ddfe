"""BASELINE, not mxfp6c: hand-written Triton versions of the benchmarked kernels, the way these
kernels are written today (docs/architecture.md section 1), each autotuned over a small config set per shape
(@triton.autotune keyed on the row count and strides; the two-launch backward baselines through
_Tuner, which times both launches together). They take the same arguments as the PyTorch
functions in problems.py and return the same outputs; `out=` writes into given tensors instead, so
the harness can poison them first and catch an unwritten element.
"""
import torch
import triton
import triton.language as tl

import measure
import mxfp6_spec
from problems import mixed_matrix


def _autotune(**kwargs):
    """triton.autotune timing each config as the harness times everything (measure.device_times:
    the device's time alone, whatever the launch path costs the host)."""
    return triton.autotune(do_bench=measure.quantiles_ms, **kwargs)


class _Tuner:
    """The fastest config of a multi-launch baseline per shape key: on a key's first call every
    config runs once (compiles) and is timed by measure.device_time (short reps, all its launches
    together); later calls run the winner. best_config: the last call's config."""

    def __init__(self, configs):
        self.configs = configs
        self.best = {}
        self.best_config = None

    def __call__(self, key, run):
        if key not in self.best:
            timings, last_error = [], None
            for cfg in self.configs:
                try:
                    run(cfg)
                    timings.append(measure.device_time(lambda: run(cfg), 5, 25)["median_ms"])
                except Exception as e:  # a config that does not fit (registers, shared memory)
                    timings.append(float("inf"))
                    last_error = e
            i = min(range(len(timings)), key=timings.__getitem__)
            if timings[i] == float("inf"):
                raise RuntimeError(f"no config ran: {last_error}")
            self.best[key] = self.configs[i]
        self.best_config = self.best[key]
        run(self.best_config)


# ---------------------------------------------------------------------------------------------
# LN-modulate forward: ROWS rows of D per program, the whole row in registers (D = 3072 padded to
# a power of two, masked).

@triton.jit
def _row_tile(T, D: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    """This program's ROWS rows of a [T, D] row-major tensor: the rows, the columns (D padded to a
    power of two), which rows exist, the mask of the [ROWS, BLOCK_D] tile and its element offsets."""
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_D)
    row_ok = rows < T
    mask = row_ok[:, None] & (cols < D)[None, :]
    return rows, cols, row_ok, mask, rows.to(tl.int64)[:, None] * D + cols[None, :]


@triton.jit
def _ln_modulate_fwd_kernel(x_ptr, scale_ptr, shift_ptr, y_ptr, mean_ptr, rstd_ptr, T, B, sample_div, eps,
                            D: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    rows, cols, row_ok, mask, offs = _row_tile(T, D, BLOCK_D, ROWS)
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


_ln_modulate_fwd_tuned = _autotune(
    configs=[triton.Config({"ROWS": r}, num_warps=w, num_stages=1)
             for r, w in ((1, 4), (1, 8), (1, 16), (2, 8), (2, 16), (4, 16))],
    key=["T", "B", "sample_div"])(_ln_modulate_fwd_kernel)  # B: per-token modulation is B = T


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
_norm_rope_fwd_tuned = _autotune(
    configs=_NORM_ROPE_CONFIGS, key=["n_rows", "token_stride", "head_stride", "pos_div"])(_norm_rope_fwd_kernel)
_norm_rope_qkv_fwd_tuned = _autotune(
    configs=_NORM_ROPE_CONFIGS, key=["n_rows", "token_stride", "part_stride", "head_stride", "pos_div"])(
    _norm_rope_qkv_fwd_kernel)


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


# ---------------------------------------------------------------------------------------------
# LN-modulate backward, per-sample modulation, [B, S, D] or [S, B, D] tokens: one pass over g and
# x. Program (b, j) takes tokens j, j + NP, ... of sample b (token b * sample_stride + s * token_stride), the whole row in registers (D padded to a power
# of two, masked), writes dx and fp32 partials of dscale/dshift; a second kernel adds the NP
# partials of each sample in order.

@triton.jit
def _ln_modulate_bwd_kernel(g_ptr, x_ptr, scale_ptr, mean_ptr, rstd_ptr, dx_ptr, dsp_ptr, dhp_ptr, S, NP,
                            sample_stride, token_stride, D: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    j = tl.program_id(1)
    cols = tl.arange(0, BLOCK_D)
    cmask = cols < D
    gain = 1.0 + tl.load(scale_ptr + b * D + cols, mask=cmask, other=0.0).to(tl.float32)
    ds = tl.zeros([BLOCK_D], dtype=tl.float32)
    dh = tl.zeros([BLOCK_D], dtype=tl.float32)
    for s in range(j, S, NP):
        t = b * sample_stride + s * token_stride
        gv = tl.load(g_ptr + t * D + cols, mask=cmask, other=0.0).to(tl.float32)
        xv = tl.load(x_ptr + t * D + cols, mask=cmask, other=0.0).to(tl.float32)
        r = tl.load(rstd_ptr + t)
        xh = tl.where(cmask, (xv - tl.load(mean_ptr + t)) * r, 0.0)
        gh = gv * gain
        m1 = tl.sum(gh, axis=0) / D
        m2 = tl.sum(gh * xh, axis=0) / D
        tl.store(dx_ptr + t * D + cols, (r * (gh - m1 - xh * m2)).to(tl.bfloat16), mask=cmask)
        ds += gv * xh
        dh += gv
    part = (b * NP + j) * D + cols
    tl.store(dsp_ptr + part, ds, mask=cmask)
    tl.store(dhp_ptr + part, dh, mask=cmask)


@triton.jit
def _ln_modulate_bwd_reduce_kernel(dsp_ptr, dhp_ptr, ds_ptr, dh_ptr, NP, D: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    cmask = cols < D
    acc_s = tl.zeros([BLOCK], dtype=tl.float32)
    acc_h = tl.zeros([BLOCK], dtype=tl.float32)
    for j in range(0, NP):
        off = (b * NP + j) * D + cols
        acc_s += tl.load(dsp_ptr + off, mask=cmask, other=0.0)
        acc_h += tl.load(dhp_ptr + off, mask=cmask, other=0.0)
    tl.store(ds_ptr + b * D + cols, acc_s.to(tl.bfloat16), mask=cmask)
    tl.store(dh_ptr + b * D + cols, acc_h.to(tl.bfloat16), mask=cmask)


_ln_modulate_bwd_tuner = _Tuner([{"NP": p, "num_warps": w} for p in (8, 16, 32) for w in (8, 16)])


def ln_modulate_bwd(g, x, scale, mean, rstd, tokens_per_sample, sequence_major=False, out=None):
    T, D = g.shape
    B, S = scale.shape[0], tokens_per_sample
    assert T == B * S and g.is_contiguous() and x.is_contiguous()
    sample_stride, token_stride = (1, B) if sequence_major else (S, 1)
    dx, dscale, dshift = out or (torch.empty_like(g), torch.empty(B, D, device=g.device, dtype=torch.bfloat16),
                                 torch.empty(B, D, device=g.device, dtype=torch.bfloat16))
    block = 1024

    def run(cfg):
        NP = min(cfg["NP"], S)
        dsp = torch.empty(B, NP, D, device=g.device, dtype=torch.float32)
        dhp = torch.empty_like(dsp)
        _ln_modulate_bwd_kernel[(B, NP)](g, x, scale, mean, rstd, dx, dsp, dhp, S, NP, sample_stride, token_stride, D=D,
                                         BLOCK_D=triton.next_power_of_2(D), num_warps=cfg["num_warps"])
        _ln_modulate_bwd_reduce_kernel[(B, triton.cdiv(D, block))](dsp, dhp, dscale, dshift, NP, D=D, BLOCK=block,
                                                                  num_warps=4)

    _ln_modulate_bwd_tuner((T, B, D, sequence_major), run)
    return dx, dscale, dshift


# LN-modulate backward, per-token modulation (scale [T, D]): ROWS tokens per program, each row
# whole in registers; dscale = g*xh and dshift = g elementwise, no sums across tokens.

@triton.jit
def _ln_modulate_bwd_per_token_kernel(g_ptr, x_ptr, scale_ptr, mean_ptr, rstd_ptr, dx_ptr, ds_ptr, dh_ptr, T,
                                      D: tl.constexpr, BLOCK_D: tl.constexpr, ROWS: tl.constexpr):
    rows, cols, row_ok, mask, offs = _row_tile(T, D, BLOCK_D, ROWS)
    graw = tl.load(g_ptr + offs, mask=mask, other=0.0)
    gv = graw.to(tl.float32)
    r = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)[:, None]
    xh = tl.where(mask, (tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
                         - tl.load(mean_ptr + rows, mask=row_ok, other=0.0)[:, None]) * r, 0.0)
    gh = gv * (1.0 + tl.load(scale_ptr + offs, mask=mask, other=0.0).to(tl.float32))
    m1 = tl.sum(gh, axis=1)[:, None] / D
    m2 = tl.sum(gh * xh, axis=1)[:, None] / D
    tl.store(dx_ptr + offs, (r * (gh - m1 - xh * m2)).to(tl.bfloat16), mask=mask)
    tl.store(ds_ptr + offs, (gv * xh).to(tl.bfloat16), mask=mask)
    tl.store(dh_ptr + offs, graw, mask=mask)


_ln_modulate_bwd_per_token_tuned = _autotune(
    configs=[triton.Config({"ROWS": r}, num_warps=w, num_stages=1)
             for r, w in ((1, 4), (1, 8), (1, 16), (2, 8), (2, 16), (4, 16))],
    key=["T"])(_ln_modulate_bwd_per_token_kernel)


def ln_modulate_bwd_per_token(g, x, scale, mean, rstd, tokens_per_sample, sequence_major=False, out=None):
    """The arguments of ln_modulate_bwd with one token per sample (scale [T, D], S = 1)."""
    T, D = g.shape
    assert tokens_per_sample == 1 and scale.shape == g.shape and g.is_contiguous() and x.is_contiguous()
    dx, dscale, dshift = out or tuple(torch.empty_like(g) for _ in range(3))
    _ln_modulate_bwd_per_token_tuned[lambda meta: (triton.cdiv(T, meta["ROWS"]),)](
        g, x, scale, mean, rstd, dx, dscale, dshift, T, D=D, BLOCK_D=triton.next_power_of_2(D))
    return dx, dscale, dshift


# ---------------------------------------------------------------------------------------------
# Whole-QKV norm+RoPE backward: NPROG persistent programs, each taking tiles of ROWS (token, head)
# rows (tile = pid, pid + NPROG, ...): dQ, dK through the backward into their strided columns of
# d(mixed_qkv), dV copied; fp32 dw partials per program, then added in order by a second kernel.

@triton.jit
def _norm_rope_bwd_tile(g_ptr, x_ptr, w_ptr, cos_ptr, sin_ptr, rstd_ptr, dx_ptr, rows, row_ok, token_stride,
                        head_stride, H, S, pos_div, ROWS: tl.constexpr):
    t = rows // H
    h = rows % H
    cols = tl.arange(0, 128)
    rmask = row_ok[:, None]
    g = tl.load(g_ptr + rows.to(tl.int64)[:, None] * 128 + cols[None, :], mask=rmask, other=0.0).to(tl.float32)
    g0, g1 = tl.split(tl.reshape(g, (ROWS, 64, 2)))
    pos = (t // pos_div) % S
    tab = pos.to(tl.int64)[:, None] * 64 + tl.arange(0, 64)[None, :]
    c = tl.load(cos_ptr + tab, mask=rmask, other=0.0)
    s = tl.load(sin_ptr + tab, mask=rmask, other=0.0)
    dn = tl.reshape(tl.join(c * g0 + s * g1, c * g1 - s * g0), (ROWS, 128))
    src = t.to(tl.int64) * token_stride + h.to(tl.int64) * head_stride
    x = tl.load(x_ptr + src[:, None] + cols[None, :], mask=rmask, other=0.0).to(tl.float32)
    r = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)
    u = x * r[:, None]
    du = dn * tl.load(w_ptr + cols).to(tl.float32)[None, :]
    dx = r[:, None] * (du - u * (tl.sum(du * u, axis=1) / 128)[:, None])
    tl.store(dx_ptr + src[:, None] + cols[None, :], dx.to(tl.bfloat16), mask=rmask)
    return tl.sum(dn * u, axis=0)


@triton.jit
def _norm_rope_qkv_bwd_kernel(dq_ptr, dk_ptr, dv_ptr, qkv_ptr, qw_ptr, kw_ptr, qc_ptr, qs_ptr, kc_ptr, ks_ptr,
                              qr_ptr, kr_ptr, dqkv_ptr, dwp_ptr, token_stride, part_stride, head_stride, n_rows, H,
                              S, pos_div, NPROG, ROWS: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, 128)
    acc_q = tl.zeros([128], dtype=tl.float32)
    acc_k = tl.zeros([128], dtype=tl.float32)
    for tile in range(pid, tl.cdiv(n_rows, ROWS), NPROG):
        rows = tile * ROWS + tl.arange(0, ROWS)
        row_ok = rows < n_rows
        acc_q += _norm_rope_bwd_tile(dq_ptr, qkv_ptr, qw_ptr, qc_ptr, qs_ptr, qr_ptr, dqkv_ptr, rows, row_ok,
                                     token_stride, head_stride, H, S, pos_div, ROWS)
        acc_k += _norm_rope_bwd_tile(dk_ptr, qkv_ptr + part_stride, kw_ptr, kc_ptr, ks_ptr, kr_ptr,
                                     dqkv_ptr + part_stride, rows, row_ok, token_stride, head_stride, H, S, pos_div,
                                     ROWS)
        dst = (rows // H).to(tl.int64) * token_stride + 2 * part_stride + (rows % H).to(tl.int64) * head_stride
        v = tl.load(dv_ptr + rows.to(tl.int64)[:, None] * 128 + cols[None, :], mask=row_ok[:, None])
        tl.store(dqkv_ptr + dst[:, None] + cols[None, :], v, mask=row_ok[:, None])
    tl.store(dwp_ptr + pid * 128 + cols, acc_q)
    tl.store(dwp_ptr + (NPROG + pid) * 128 + cols, acc_k)


@triton.jit
def _norm_rope_bwd_kernel(dy_ptr, x_ptr, w_ptr, cos_ptr, sin_ptr, rstd_ptr, dx_ptr, dwp_ptr, token_stride, head_stride,
                          n_rows, H, S, pos_div, NPROG, ROWS: tl.constexpr):
    """Per tensor: dx written through x's strides (its columns of d(mixed_qkv)); a dw partial per program."""
    pid = tl.program_id(0)
    acc = tl.zeros([128], dtype=tl.float32)
    for tile in range(pid, tl.cdiv(n_rows, ROWS), NPROG):
        rows = tile * ROWS + tl.arange(0, ROWS)
        acc += _norm_rope_bwd_tile(dy_ptr, x_ptr, w_ptr, cos_ptr, sin_ptr, rstd_ptr, dx_ptr, rows, rows < n_rows,
                                   token_stride, head_stride, H, S, pos_div, ROWS)
    tl.store(dwp_ptr + pid * 128 + tl.arange(0, 128), acc)


@triton.jit
def _dw_reduce_kernel(dwp_ptr, dw_ptr, NPROG, BLOCK_P: tl.constexpr):
    grp = tl.program_id(0)
    cols = tl.arange(0, 128)
    acc = tl.zeros([128], dtype=tl.float32)
    for j0 in range(0, NPROG, BLOCK_P):
        j = j0 + tl.arange(0, BLOCK_P)
        tile = tl.load(dwp_ptr + (grp * NPROG + j).to(tl.int64)[:, None] * 128 + cols[None, :],
                       mask=(j < NPROG)[:, None], other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(dw_ptr + grp * 128 + cols, acc)


_norm_rope_qkv_bwd_tuner = _Tuner([{"ROWS": r, "num_warps": w, "NPROG": n}
                                   for r, w, n in ((8, 2, 2112), (16, 4, 1056), (16, 4, 2112), (32, 4, 1056),
                                                   (32, 8, 1056), (64, 8, 528))])


def norm_rope_qkv_bwd(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd, k_rstd, pos_div,
                      out=None):
    T, parts, H, Dh = qkv.shape
    assert parts == 3 and Dh == 128 and qkv.stride(3) == 1 and dq.is_contiguous() and dk.is_contiguous()
    dqkv, dw = out or (torch.empty_strided(qkv.shape, qkv.stride(), device=qkv.device, dtype=qkv.dtype),
                       torch.empty(2, 128, device=qkv.device, dtype=torch.float32))
    assert dqkv.stride() == qkv.stride()
    n_rows = T * H

    def run(cfg):
        nprog = min(cfg["NPROG"], triton.cdiv(n_rows, cfg["ROWS"]))
        dwp = torch.empty(2, nprog, 128, device=qkv.device, dtype=torch.float32)
        _norm_rope_qkv_bwd_kernel[(nprog,)](
            dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd, k_rstd, dqkv, dwp,
            qkv.stride(0), qkv.stride(1), qkv.stride(2), n_rows, H, q_cos.shape[0], pos_div, nprog,
            ROWS=cfg["ROWS"], num_warps=cfg["num_warps"])
        _dw_reduce_kernel[(2,)](dwp, dw, nprog, BLOCK_P=32, num_warps=4)

    _norm_rope_qkv_bwd_tuner((n_rows, qkv.stride(0), qkv.stride(1), qkv.stride(2), pos_div), run)
    return dqkv, dw


_norm_rope_bwd_tuner = _Tuner([{"ROWS": r, "num_warps": w, "NPROG": n}
                               for r, w, n in ((8, 2, 2112), (16, 4, 1056), (16, 4, 2112), (32, 4, 1056),
                                               (32, 8, 1056), (64, 8, 528))])


def norm_rope_bwd(dy, x, weight, cos, sin, rstd, pos_div, out=None):
    """Per-tensor backward: dx (bf16, x's strides: its columns of d(mixed_qkv)) and dw [128] f32."""
    T, H, Dh = x.shape
    assert Dh == 128 and x.stride(2) == 1 and dy.is_contiguous()
    dx, dw = out or (torch.empty_strided(x.shape, x.stride(), device=x.device, dtype=x.dtype),
                     torch.empty(128, device=x.device, dtype=torch.float32))
    assert dx.stride() == x.stride()
    n_rows = T * H

    def run(cfg):
        nprog = min(cfg["NPROG"], triton.cdiv(n_rows, cfg["ROWS"]))
        dwp = torch.empty(nprog, 128, device=x.device, dtype=torch.float32)
        _norm_rope_bwd_kernel[(nprog,)](dy, x, weight, cos, sin, rstd, dx, dwp, x.stride(0), x.stride(1), n_rows, H,
                                        cos.shape[0], pos_div, nprog, ROWS=cfg["ROWS"], num_warps=cfg["num_warps"])
        _dw_reduce_kernel[(1,)](dwp, dw, nprog, BLOCK_P=32, num_warps=4)

    _norm_rope_bwd_tuner((n_rows, x.stride(0), x.stride(1), pos_div), run)
    return dx, dw


# ---------------------------------------------------------------------------------------------
# MXFP6 packers. The spec's integer encode on the bf16 bits (the same steps as
# mxfp6_spec.encode_codes) of blocks of 32 along a tile's last axis, codes packed four to 24 bits
# and stored as 32-bit words: the 24 bytes of a block are 6 words, 3 per half block.

@triton.jit
def _mxfp6_encode(bits, EMAX: tl.constexpr, EMIN: tl.constexpr, MB: tl.constexpr, TH: tl.constexpr):
    """bits: [N, 32] int32 (0..65535), a block per row -> (scale bytes [N], 6-bit codes [N, 32])."""
    mag = bits & 0x7FFF
    nonfinite = mag >= 0x7F80
    amax = tl.max(tl.where(nonfinite, 0, mag), axis=1)
    has = tl.max(nonfinite.to(tl.int32), axis=1) > 0
    E = amax >> 7
    s = E - (127 + EMAX) + ((amax & 0x7F) > TH).to(tl.int32)
    scale = tl.where(E == 0, 0, tl.minimum(tl.maximum(s, -127), 127) + 127)
    scale = tl.where(has, 255, scale)
    se = (scale - 127)[:, None]
    ex = (bits >> 7) & 0xFF
    m = bits & 0x7F
    sub = ex == 0
    M = tl.where(sub, m, m + 128)
    k = tl.where(sub, -133, ex - 134)
    e = ((M.to(tl.float32).to(tl.int32, bitcast=True) >> 23) - 127) + k - se
    qe = tl.maximum(e, EMIN) - MB
    shift = k - se - qe
    n = tl.minimum(tl.maximum(-shift, 0), 10)
    q = M >> n
    p2 = (n * 0 + 1) << n
    rem = M & (p2 - 1)
    half = p2 >> 1
    up = (n > 0) & ((rem > half) | ((rem == half) & ((q & 1) == 1)))
    r = tl.where(shift >= 0, M << tl.minimum(tl.maximum(shift, 0), MB), q + up.to(tl.int32))
    code = tl.minimum((tl.maximum(e - EMIN, 0) << MB) + r, 31)
    code = tl.where(M == 0, 0, code)
    code = tl.where(has[:, None] | (ex == 0xFF), 31, code) | (((bits >> 15) & 1) << 5)
    return scale, code


@triton.jit
def _mxfp6_words(code, N: tl.constexpr):
    """codes [N, 32] -> the three little-endian 32-bit words of each half block (16 codes, 12
    bytes), [2N] each, half block 2*n + h of block n: 4 codes -> a 24-bit word w; 4 words -> 3."""
    a, b = tl.split(tl.reshape(code, (N * 8, 2, 2)))
    c0, c2 = tl.split(a)
    c1, c3 = tl.split(b)
    w = c0 | (c1 << 6) | (c2 << 12) | (c3 << 18)
    a, b = tl.split(tl.reshape(w, (N * 2, 2, 2)))
    w0, w2 = tl.split(a)
    w1, w3 = tl.split(b)
    return w0 | (w1 << 24), (w1 >> 8) | (w2 << 16), (w2 >> 16) | (w3 << 8)


# Row packer: NB consecutive 32-element blocks per program (row-major X with C % 32 == 0: block i
# of the flattened tensor is row i // (C/32)'s block, its data at byte 24*i, its scale at i).

@triton.jit
def _mxfp6_pack_rows_kernel(x_ptr, data_ptr, scale_ptr, n_blocks, EMAX: tl.constexpr, EMIN: tl.constexpr,
                            MB: tl.constexpr, TH: tl.constexpr, NB: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    blk = pid * NB + tl.arange(0, NB)
    ok = blk < n_blocks
    bits = tl.load(x_ptr + blk[:, None] * 32 + tl.arange(0, 32)[None, :], mask=ok[:, None], other=0)
    scale, code = _mxfp6_encode(bits.to(tl.int32) & 0xFFFF, EMAX, EMIN, MB, TH)
    v0, v1, v2 = _mxfp6_words(code, NB)
    half_block = pid * (NB * 2) + tl.arange(0, NB * 2)
    hok = half_block < 2 * n_blocks
    out = data_ptr + half_block * 3
    tl.store(out, v0, mask=hok)
    tl.store(out + 1, v1, mask=hok)
    tl.store(out + 2, v2, mask=hok)
    tl.store(scale_ptr + blk, scale.to(tl.uint8), mask=ok)


_mxfp6_pack_rows_tuned = _autotune(
    configs=[triton.Config({"NB": nb}, num_warps=w, num_stages=1)
             for nb, w in ((8, 1), (16, 2), (32, 2), (32, 4), (64, 4), (64, 8))],
    key=["n_blocks", "EMAX", "TH"])(_mxfp6_pack_rows_kernel)


def _format_constants(fmt, mode):
    emax, emin, mb, _, _ = mxfp6_spec.FORMATS[fmt]
    return {"EMAX": emax, "EMIN": emin, "MB": mb, "TH": mxfp6_spec.mode_threshold(fmt, mode)}


def _words(t):
    """A contiguous uint8 blob as 32-bit words (its byte count is a multiple of 4)."""
    assert t.is_contiguous() and t.dtype == torch.uint8
    return t.view(-1).view(torch.int32)


def mxfp6_pack_rows(x, fmt, mode, out=None):
    R, C = x.shape
    assert C % 32 == 0 and x.is_contiguous()
    data, scales = out or (torch.empty(R, C * 3 // 4, device=x.device, dtype=torch.uint8),
                           torch.empty(R, C // 32, device=x.device, dtype=torch.uint8))
    assert data.is_contiguous() and scales.is_contiguous()
    n_blocks = R * C // 32
    _mxfp6_pack_rows_tuned[lambda meta: (triton.cdiv(n_blocks, meta["NB"]),)](
        x.view(torch.int16), _words(data), scales, n_blocks, **_format_constants(fmt, mode))
    return data, scales


# Column and dual packers: program (rb, j) loads the [32, BLOCK_C] tile of X[R, C] at rows
# 32*rb .., columns j*BLOCK_C .. once. Its columns, transposed to [BLOCK_C, 32], are BLOCK_C
# column blocks: column c's blob of row block rb at byte (c*RB + rb)*24 of data [C, RB, 24], its
# scale at c*RB + rb. The dual kernel also packs the tile's rows: viewed as [BLOCK_C, 32], block
# n is row n // (BLOCK_C/32), column block j*BLOCK_C/32 + n % (BLOCK_C/32), at byte
# row*(3C/4) + block*24 of data [R, 3C/4], its scale at row*(C/32) + block.

@triton.jit
def _mxfp6_store_column_blobs(tile, col0, rb, RB, C, data_ptr, scale_ptr, EMAX: tl.constexpr, EMIN: tl.constexpr,
                              MB: tl.constexpr, TH: tl.constexpr, BLOCK_C: tl.constexpr):
    scale, code = _mxfp6_encode(tl.trans(tile), EMAX, EMIN, MB, TH)
    v0, v1, v2 = _mxfp6_words(code, BLOCK_C)
    h = tl.arange(0, 2 * BLOCK_C)
    hcol = col0 + h // 2
    out = data_ptr + (hcol.to(tl.int64) * RB + rb) * 6 + (h % 2) * 3
    hok = hcol < C
    tl.store(out, v0, mask=hok)
    tl.store(out + 1, v1, mask=hok)
    tl.store(out + 2, v2, mask=hok)
    cols = col0 + tl.arange(0, BLOCK_C)
    tl.store(scale_ptr + cols.to(tl.int64) * RB + rb, scale.to(tl.uint8), mask=cols < C)


@triton.jit
def _mxfp6_load_tile(x_ptr, rb, col0, C, BLOCK_C: tl.constexpr):
    """The [32, BLOCK_C] tile's bf16 bits as int32 (0..65535); columns past C read as zeros."""
    rows = rb * 32 + tl.arange(0, 32)
    cols = col0 + tl.arange(0, BLOCK_C)
    bits = tl.load(x_ptr + rows[:, None] * C + cols[None, :], mask=(cols < C)[None, :], other=0)
    return bits.to(tl.int32) & 0xFFFF


@triton.jit
def _mxfp6_pack_cols_kernel(x_ptr, data_ptr, scale_ptr, RB, C, EMAX: tl.constexpr, EMIN: tl.constexpr,
                            MB: tl.constexpr, TH: tl.constexpr, BLOCK_C: tl.constexpr):
    rb = tl.program_id(0).to(tl.int64)
    col0 = tl.program_id(1) * BLOCK_C
    tile = _mxfp6_load_tile(x_ptr, rb, col0, C, BLOCK_C)
    _mxfp6_store_column_blobs(tile, col0, rb, RB, C, data_ptr, scale_ptr, EMAX, EMIN, MB, TH, BLOCK_C)


@triton.jit
def _mxfp6_pack_dual_kernel(x_ptr, row_data_ptr, row_scale_ptr, col_data_ptr, col_scale_ptr, RB, C,
                            EMAX: tl.constexpr, EMIN: tl.constexpr, MB: tl.constexpr, TH: tl.constexpr,
                            BLOCK_C: tl.constexpr):
    rb = tl.program_id(0).to(tl.int64)
    col0 = tl.program_id(1) * BLOCK_C
    tile = _mxfp6_load_tile(x_ptr, rb, col0, C, BLOCK_C)
    scale, code = _mxfp6_encode(tl.reshape(tile, (BLOCK_C, 32)), EMAX, EMIN, MB, TH)
    v0, v1, v2 = _mxfp6_words(code, BLOCK_C)
    h = tl.arange(0, 2 * BLOCK_C)
    row = rb * 32 + (h // 2) // (BLOCK_C // 32)
    blk = col0 // 32 + (h // 2) % (BLOCK_C // 32)
    out = row_data_ptr + row * (C // 32 * 6) + blk * 6 + (h % 2) * 3
    hok = blk < C // 32
    tl.store(out, v0, mask=hok)
    tl.store(out + 1, v1, mask=hok)
    tl.store(out + 2, v2, mask=hok)
    n = tl.arange(0, BLOCK_C)
    srow = rb * 32 + n // (BLOCK_C // 32)
    sblk = col0 // 32 + n % (BLOCK_C // 32)
    tl.store(row_scale_ptr + srow * (C // 32) + sblk, scale.to(tl.uint8), mask=sblk < C // 32)
    _mxfp6_store_column_blobs(tile, col0, rb, RB, C, col_data_ptr, col_scale_ptr, EMAX, EMIN, MB, TH, BLOCK_C)


_MXFP6_TILE_CONFIGS = [triton.Config({"BLOCK_C": c}, num_warps=w, num_stages=1)
                       for c, w in ((32, 2), (32, 4), (64, 4), (64, 8), (128, 4), (128, 8))]
_mxfp6_pack_cols_tuned = _autotune(configs=_MXFP6_TILE_CONFIGS, key=["RB", "C", "EMAX", "TH"])(
    _mxfp6_pack_cols_kernel)
_mxfp6_pack_dual_tuned = _autotune(configs=_MXFP6_TILE_CONFIGS, key=["RB", "C", "EMAX", "TH"])(
    _mxfp6_pack_dual_kernel)


def _column_blobs(x, out):
    R, C = x.shape
    assert R % 32 == 0 and C % 32 == 0 and x.is_contiguous()
    data, scales = out or (torch.empty(C, R * 3 // 4, device=x.device, dtype=torch.uint8),
                           torch.empty(C, R // 32, device=x.device, dtype=torch.uint8))
    assert data.numel() == C * R * 3 // 4 and scales.numel() == C * R // 32 and scales.is_contiguous()
    return data, scales


def mxfp6_pack_cols(x, fmt, mode, out=None):
    """Column blobs of X[R, C] (the row blobs of X^T): data [C, 3R/4], scales [C, R/32]."""
    R, C = x.shape
    data, scales = _column_blobs(x, out)
    _mxfp6_pack_cols_tuned[lambda meta: (R // 32, triton.cdiv(C, meta["BLOCK_C"]))](
        x.view(torch.int16), _words(data), scales, R // 32, C, **_format_constants(fmt, mode))
    return data, scales


def mxfp6_pack_dual(x, fmt, mode, out=None):
    """Row then column blobs of X[R, C] from one read: row data [R, 3C/4], row scales [R, C/32],
    column data [C, 3R/4], column scales [C, R/32]."""
    R, C = x.shape
    row_data, row_scales = out[:2] if out else (torch.empty(R, C * 3 // 4, device=x.device, dtype=torch.uint8),
                                                torch.empty(R, C // 32, device=x.device, dtype=torch.uint8))
    assert row_data.numel() == R * C * 3 // 4 and row_scales.numel() == R * C // 32 and row_scales.is_contiguous()
    col_data, col_scales = _column_blobs(x, out[2:] if out else None)
    _mxfp6_pack_dual_tuned[lambda meta: (R // 32, triton.cdiv(C, meta["BLOCK_C"]))](
        x.view(torch.int16), _words(row_data), row_scales, _words(col_data), col_scales, R // 32, C,
        **_format_constants(fmt, mode))
    return row_data, row_scales, col_data, col_scales


# ---------------------------------------------------------------------------------------------
# The packer prologue's baseline: the unfused sequence, timed as one -- the Triton whole-QKV
# backward above writes d(mixed_qkv), the Triton dual packer reads it back.

class _Sequence:
    """The tuners of a baseline made of several run in order; best_config: each one's last choice,
    prefixed with its name."""

    def __init__(self, **tuners):
        self.tuners = tuners

    @property
    def best_config(self):
        merged = {}
        for name, tuner in self.tuners.items():
            cfg = getattr(tuner, "best_config", None)
            if isinstance(cfg, dict):
                merged.update({f"{name}.{k}": v for k, v in cfg.items()})
            elif cfg is not None:
                merged.update({f"{name}.{k}": v for k, v in
                               {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}.items()})
        return merged or None


_norm_rope_qkv_bwd_pack_sequence = _Sequence(bwd=_norm_rope_qkv_bwd_tuner, pack=_mxfp6_pack_dual_tuned)


def norm_rope_qkv_bwd_pack(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd, k_rstd, pos_div,
                           fmt, mode, out=None):
    """out: row data, row scales, column data, column scales, dw[, d(mixed_qkv) in qkv's layout];
    returns all six, d(mixed_qkv) allocated here when out has none (the unfused sequence writes it
    either way)."""
    T, _, H, Dh = qkv.shape
    C = 3 * H * Dh
    if out is None:
        u8 = lambda *shape: torch.empty(*shape, device=qkv.device, dtype=torch.uint8)
        out = (u8(T, C * 3 // 4), u8(T, C // 32), u8(C, T * 3 // 4), u8(C, T // 32),
               torch.empty(2, Dh, device=qkv.device, dtype=torch.float32))
    if len(out) == 5:
        out = tuple(out) + (torch.empty_strided(qkv.shape, qkv.stride(), device=qkv.device, dtype=qkv.dtype),)
    row_data, row_scales, col_data, col_scales, dw, dqkv = out
    norm_rope_qkv_bwd(dq, dk, dv, qkv, q_weight, k_weight, q_cos, q_sin, k_cos, k_sin, q_rstd, k_rstd, pos_div,
                      out=(dqkv, dw))
    mxfp6_pack_dual(mixed_matrix(dqkv), fmt, mode, out=(row_data, row_scales, col_data, col_scales))
    return tuple(out)


IMPLEMENTATIONS = {
    "ln_modulate_fwd": (ln_modulate_fwd, _ln_modulate_fwd_tuned),
    "norm_rope_fwd": (norm_rope_fwd, _norm_rope_fwd_tuned),
    "norm_rope_qkv_fwd": (norm_rope_qkv_fwd, _norm_rope_qkv_fwd_tuned),
    "ln_modulate_fwd_per_token": (ln_modulate_fwd, _ln_modulate_fwd_tuned),
    "ln_modulate_bwd": (ln_modulate_bwd, _ln_modulate_bwd_tuner),
    "ln_modulate_bwd_per_token": (ln_modulate_bwd_per_token, _ln_modulate_bwd_per_token_tuned),
    "norm_rope_bwd": (norm_rope_bwd, _norm_rope_bwd_tuner),
    "norm_rope_qkv_bwd": (norm_rope_qkv_bwd, _norm_rope_qkv_bwd_tuner),
    "mxfp6_pack_rows": (mxfp6_pack_rows, _mxfp6_pack_rows_tuned),
    "mxfp6_pack_cols": (mxfp6_pack_cols, _mxfp6_pack_cols_tuned),
    "mxfp6_pack_dual": (mxfp6_pack_dual, _mxfp6_pack_dual_tuned),
    "norm_rope_qkv_bwd_pack": (norm_rope_qkv_bwd_pack, _norm_rope_qkv_bwd_pack_sequence),
    "norm_rope_qkv_bwd_pack_bf16": (norm_rope_qkv_bwd_pack, _norm_rope_qkv_bwd_pack_sequence),
}


def best_config(kernel):
    """The autotuner's choice for the last shape it ran, as a dict."""
    cfg = getattr(IMPLEMENTATIONS[kernel][1], "best_config", None)
    if cfg is None:
        return None
    if isinstance(cfg, dict):  # a _Tuner's
        return dict(cfg)
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
