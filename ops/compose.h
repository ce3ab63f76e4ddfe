// Composition: an op call (named tensors and scalars) and a plan become the plan's launches, each
// a kernel with every parameter bound by name: the op's tensors, views of them (a [T, ...] tensor
// as [T/32, 32, ...] blocks, a weight broadcast over 32 rows), scratch buffers between launches
// (fp32 partials, token-major column scales) and the scalars the kernels take (strides, the
// sample walk). The one place that knows how an op's launches fit together: the tuner, the
// benchmark, the server's clients and the Python ops all run plans through it.
//
// The launches are executed by a Launcher: the runtime's (GPU, ops/execute.h) or the reference
// interpreter's (CPU, used by the tuner's correctness gate and the tests).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "ops/plan.h"
#include "runtime/runtime.h"
#include "support/status.h"

namespace mxfp6::ops {

/// What a caller passes to an op: its tensors and scalars by name (the names of the op's
/// arguments, listed per op in docs/architecture.md, "Ops"), e.g. ln_modulate_fwd:
/// x, scale, shift, y, mean, rstd; tokens_per_sample, eps.
struct OpCall {
  std::map<std::string, rt::TensorArg> tensors;
  std::map<std::string, double> scalars;
};

/// One bound parameter: a tensor view, an integer or a float scalar.
using StepValue = std::variant<rt::TensorArg, int64_t, double>;

struct Step {
  size_t launch = 0;  // index into Plan::launches
  std::string kernel;
  std::map<std::string, StepValue> args;  // by the kernel's parameter names
};

/// Allocates `bytes` of device (or, for the interpreter, host) memory that lives until the
/// plan's launches are done; 256-byte aligned.
using ScratchAllocator = std::function<Expected<void*>(size_t bytes)>;

/// The problem (key fields) of a call: tokens, heads, the sample size, the specialized size,
/// read off the call's tensors. Errors name the missing or misshapen argument.
Expected<Problem> problemOf(const OpSpec& op, const std::map<std::string, std::string>& variant, const OpCall& call);

/// The plan's launches for this call, scratch allocated through `scratch`. Errors name the
/// argument (a missing tensor or scalar, a tensor that cannot be viewed as a launch needs).
Expected<std::vector<Step>> compose(const Plan& plan, const Problem& problem, const OpCall& call,
                                    const ScratchAllocator& scratch);

/// Runs composed launches in order.
class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual Status launch(const Plan& plan, const Step& step) = 0;
};

Status runSteps(const Plan& plan, const std::vector<Step>& steps, Launcher& launcher);

// Views of tensors, as the compositions need them ------------------------------------------

/// A contiguous tensor seen with other sizes of the same element count: error if not contiguous.
Expected<rt::TensorArg> reshaped(const rt::TensorArg& t, std::vector<int64_t> sizes, const std::string& name);
/// Dimension 0 of size a*b split into [a, b] (any strides).
Expected<rt::TensorArg> splitFirst(const rt::TensorArg& t, int64_t a, int64_t b, const std::string& name);
/// A 1-D tensor [n] broadcast to [rows, n] (stride 0 over the rows).
rt::TensorArg broadcastRows(const rt::TensorArg& t, int64_t rows);

}  // namespace mxfp6::ops
