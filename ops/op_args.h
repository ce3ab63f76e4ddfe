// The tensors of an op call, declared per op from its problem: what the tuner allocates and
// fills, what the tests and bindings validate against, and how each output is compared with a
// reference. Names are the op call's (ops/compose.h): ln_modulate_fwd takes x, scale, shift and
// writes y, mean, rstd.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/plan.h"
#include "runtime/runtime.h"

namespace mxfp6::ops {

/// How an output is compared with a reference (docs/architecture.md, "Tuning"):
enum class Compare {
  Exact,      // byte for byte: the packers' blobs of bf16 inputs, V's copy
  Bf16,       // |out - ref| <= 1 bf16 ulp of ref + 2^-16 x the tensor's largest |ref|
  F32,        // |out - ref| <= 2^-18 |ref| + 2^-20 x the tensor's largest |ref|
  BlobsOfComputed,  // blobs packed from values computed in fp32 (the prologue): a value on a
                    // bf16 rounding boundary may round either way, so at most 1 byte in 1000 differs
};

struct TensorDecl {
  std::string name;
  rt::Dtype dtype = rt::Dtype::BF16;
  std::vector<int64_t> storage;  // the allocation, contiguous
  /// The view the op is called with, when not the whole storage: sizes, strides (elements) and
  /// the offset of its first element (Q/K/V slices of mixed_qkv).
  std::vector<int64_t> viewSizes, viewStrides;
  int64_t viewOffset = 0;
  bool output = false;
  double lo = -2, hi = 2;  // inputs: uniform random values in [lo, hi)
  Compare compare = Compare::Bf16;

  int64_t elements() const;
};

struct OpArgs {
  std::vector<TensorDecl> tensors;
  std::map<std::string, double> scalars;
};

/// The declarations of a problem's call, in a fixed order (inputs first).
OpArgs declareArgs(const Problem& problem);

}  // namespace mxfp6::ops
