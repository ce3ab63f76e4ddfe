// Launch metadata of two real kernels as mxfp6c writes it (ln_modulate_fwd and norm_rope_fwd,
// kernels_dsl/, with "params" and "rows"; rows_per_program changed so grids round up), and PTX
// entries with their ABIs, for tests of launches from tensors. The fake driver records what
// such an entry receives and runs nothing.
#pragma once

namespace mxfp6::rt::testing {

/// ln_modulate_fwd(x: bf16[T, D], scale: bf16[B, D], shift: bf16[B, D], y: out bf16[T, D],
///                 mean: out f32[T], rstd: out f32[T], sample_div: i32, eps: f32 = 1e-6),
/// D = 3072, rows over T; the body uses T and B, and divides by sample_div and B (so both are at
/// least 1, and the runtime passes their multipliers and shifts).
inline constexpr const char* kLnModulateFwdMetadata = R"json({
  "kernel": "ln_modulate_fwd", "entry": "ln_modulate_fwd", "target": "sm_90",
  "abi": [{"kind": "ptr", "name": "x"}, {"kind": "ptr", "name": "scale"},
          {"kind": "ptr", "name": "shift"}, {"kind": "ptr", "name": "y"},
          {"kind": "ptr", "name": "mean"}, {"kind": "ptr", "name": "rstd"},
          {"kind": "i32", "name": "sample_div", "minimum": 1}, {"kind": "f32", "name": "eps"},
          {"kind": "i64", "name": "T"}, {"kind": "i64", "name": "B", "minimum": 1},
          {"kind": "i32", "name": "divisor_multiplier(sample_div)", "derived": "divisor_multiplier", "of": "sample_div"},
          {"kind": "i32", "name": "divisor_shift(sample_div)", "derived": "divisor_shift", "of": "sample_div"},
          {"kind": "i32", "name": "divisor_multiplier(B)", "derived": "divisor_multiplier", "of": "B"},
          {"kind": "i32", "name": "divisor_shift(B)", "derived": "divisor_shift", "of": "B"}],
  "block": [384, 1, 1], "shared_bytes": 0, "rows_per_program": 2, "alignment": 16,
  "config": {"D": 3072, "ROWS": 2, "THREADS": 384, "VEC": 8},
  "params": [
    {"name": "x", "kind": "tensor", "dtype": "bf16", "output": false,
     "dims": [{"dim": "T"}, {"const": 3072, "name": "D"}],
     "strides": [{"row_major": true}, {"row_major": true}]},
    {"name": "scale", "kind": "tensor", "dtype": "bf16", "output": false,
     "dims": [{"dim": "B"}, {"const": 3072, "name": "D"}],
     "strides": [{"row_major": true}, {"row_major": true}]},
    {"name": "shift", "kind": "tensor", "dtype": "bf16", "output": false,
     "dims": [{"dim": "B"}, {"const": 3072, "name": "D"}],
     "strides": [{"row_major": true}, {"row_major": true}]},
    {"name": "y", "kind": "tensor", "dtype": "bf16", "output": true,
     "dims": [{"dim": "T"}, {"const": 3072, "name": "D"}],
     "strides": [{"row_major": true}, {"row_major": true}]},
    {"name": "mean", "kind": "tensor", "dtype": "f32", "output": true,
     "dims": [{"dim": "T"}], "strides": [{"row_major": true}]},
    {"name": "rstd", "kind": "tensor", "dtype": "f32", "output": true,
     "dims": [{"dim": "T"}], "strides": [{"row_major": true}]},
    {"name": "sample_div", "kind": "scalar", "dtype": "i32"},
    {"name": "eps", "kind": "scalar", "dtype": "f32", "default": 1e-06}],
  "rows": [{"dim": "T"}]
})json";

/// norm_rope_fwd(x: bf16[T, H, 128] strides(x_token_stride, x_head_stride, 1),
///               weight: bf16[128], rope_cos: f32[S, 64], rope_sin: f32[S, 64],
///               y: out bf16[T, H, 128], rstd: out f32[T, H], x_token_stride: i64,
///               x_head_stride: i64, pos_div: i32, eps: f32 = 1e-6), rows over (T, H); both
/// strides multiples of 8 (16-byte vectors of bf16); pos_div, H and S >= 1 (the row's digits divide
/// by H, the position is (t / pos_div) % S), with the multipliers and shifts of the three.
inline constexpr const char* kNormRopeFwdMetadata = R"json({
  "kernel": "norm_rope_fwd", "entry": "norm_rope_fwd", "target": "sm_90",
  "abi": [{"kind": "ptr", "name": "x"}, {"kind": "ptr", "name": "weight"},
          {"kind": "ptr", "name": "rope_cos"}, {"kind": "ptr", "name": "rope_sin"},
          {"kind": "ptr", "name": "y"}, {"kind": "ptr", "name": "rstd"},
          {"kind": "i64", "name": "x_token_stride", "multiple_of": 8},
          {"kind": "i64", "name": "x_head_stride", "multiple_of": 8},
          {"kind": "i32", "name": "pos_div", "minimum": 1}, {"kind": "f32", "name": "eps"},
          {"kind": "i64", "name": "T"}, {"kind": "i64", "name": "H", "minimum": 1},
          {"kind": "i64", "name": "S", "minimum": 1},
          {"kind": "i32", "name": "divisor_multiplier(pos_div)", "derived": "divisor_multiplier", "of": "pos_div"},
          {"kind": "i32", "name": "divisor_shift(pos_div)", "derived": "divisor_shift", "of": "pos_div"},
          {"kind": "i32", "name": "divisor_multiplier(H)", "derived": "divisor_multiplier", "of": "H"},
          {"kind": "i32", "name": "divisor_shift(H)", "derived": "divisor_shift", "of": "H"},
          {"kind": "i32", "name": "divisor_multiplier(S)", "derived": "divisor_multiplier", "of": "S"},
          {"kind": "i32", "name": "divisor_shift(S)", "derived": "divisor_shift", "of": "S"}],
  "block": [256, 1, 1], "shared_bytes": 0, "rows_per_program": 4, "alignment": 16,
  "config": {"PREFETCH": 1, "ROWS": 4, "THREADS": 16, "VEC": 8},
  "params": [
    {"name": "x", "kind": "tensor", "dtype": "bf16", "output": false,
     "dims": [{"dim": "T"}, {"dim": "H"}, {"const": 128}],
     "strides": [{"param": "x_token_stride"}, {"param": "x_head_stride"}, {"const": 1}]},
    {"name": "weight", "kind": "tensor", "dtype": "bf16", "output": false,
     "dims": [{"const": 128}], "strides": [{"row_major": true}]},
    {"name": "rope_cos", "kind": "tensor", "dtype": "f32", "output": false,
     "dims": [{"dim": "S"}, {"const": 64}], "strides": [{"row_major": true}, {"row_major": true}]},
    {"name": "rope_sin", "kind": "tensor", "dtype": "f32", "output": false,
     "dims": [{"dim": "S"}, {"const": 64}], "strides": [{"row_major": true}, {"row_major": true}]},
    {"name": "y", "kind": "tensor", "dtype": "bf16", "output": true,
     "dims": [{"dim": "T"}, {"dim": "H"}, {"const": 128}],
     "strides": [{"row_major": true}, {"row_major": true}, {"row_major": true}]},
    {"name": "rstd", "kind": "tensor", "dtype": "f32", "output": true,
     "dims": [{"dim": "T"}, {"dim": "H"}], "strides": [{"row_major": true}, {"row_major": true}]},
    {"name": "x_token_stride", "kind": "scalar", "dtype": "i64"},
    {"name": "x_head_stride", "kind": "scalar", "dtype": "i64"},
    {"name": "pos_div", "kind": "scalar", "dtype": "i32"},
    {"name": "eps", "kind": "scalar", "dtype": "f32", "default": 1e-06}],
  "rows": [{"dim": "T"}, {"dim": "H"}]
})json";

/// The two entries with their ABIs' parameter sizes; bodies that do nothing.
inline constexpr const char* kTensorKernelsPtx = R"(.version 8.0
.target sm_90
.address_size 64

.visible .entry ln_modulate_fwd(
    .param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3, .param .u64 p4,
    .param .u64 p5, .param .u32 p6, .param .f32 p7, .param .u64 p8, .param .u64 p9,
    .param .u32 p10, .param .u32 p11, .param .u32 p12, .param .u32 p13
)
{
    ret;
}

.visible .entry norm_rope_fwd(
    .param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3, .param .u64 p4,
    .param .u64 p5, .param .u64 p6, .param .u64 p7, .param .u32 p8, .param .f32 p9,
    .param .u64 p10, .param .u64 p11, .param .u64 p12, .param .u32 p13, .param .u32 p14,
    .param .u32 p15, .param .u32 p16, .param .u32 p17, .param .u32 p18
)
{
    ret;
}
)";

}  // namespace mxfp6::rt::testing
