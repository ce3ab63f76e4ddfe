// Launches from tensors: one argument per declared parameter, checked against the signature in
// the kernel's metadata before anything reaches the driver. The raw ABI cannot see a bf16
// [T, 3072] passed where [T, 4096] was compiled, or f32 where bf16 was, or a transposed view: the
// kernel would run on the wrong bytes. Here every such mistake is an error naming the argument,
// and the runtime sizes and the grid come from the shapes instead of from the caller.
//
// Vector accesses need no check of their own: the code generator chose them from the strides the
// kernel was compiled for (a constant 1, the innermost stride of a row-major tensor, a stride
// parameter's or a runtime size's recorded multiple_of), and those are what is checked here.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "runtime/runtime.h"

namespace mxfp6::rt {
namespace {

std::string join(std::span<const int64_t> values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text;
}

std::string hexAddress(uintptr_t address) {
  char text[32];
  std::snprintf(text, sizeof(text), "0x%" PRIxPTR, address);
  return text;
}

/// "bf16[B, 3072]": the declared type, constants as numbers and runtime sizes by name.
std::string declaredType(const ParamSpec& param) {
  std::string text = std::string(dtypeName(param.dtype)) + "[";
  for (size_t d = 0; d < param.dims.size(); ++d) {
    const SizeSpec& size = param.dims[d];
    text += (d ? ", " : "") + (size.isConstant() ? std::to_string(size.constant) : size.name);
  }
  return text + "]";
}

/// "f32[4, 3072]": what was passed.
std::string passedType(const TensorArg& t) {
  int ndim = std::clamp(t.ndim, 0, kMaxTensorDims);
  return std::string(dtypeName(t.dtype)) + "[" + join(std::span(t.sizes.data(), ndim)) + "]";
}

/// "an i32 scalar" / "a pointer": what was passed where a scalar or tensor was expected.
std::string scalarText(const LaunchArg& a) {
  if (a.kind == ArgKind::Pointer) return "a pointer";
  return std::string("an ") + argKindName(a.kind) + " scalar";  // i32, i64, f32: all take "an"
}

std::string scalarType(Dtype dtype) { return std::string("an ") + dtypeName(dtype) + " scalar"; }

int64_t integerValue(const LaunchArg& a) {
  return a.kind == ArgKind::I32 ? a.value.i32 : a.kind == ArgKind::I64 ? a.value.i64 : 0;
}

ArgKind scalarKind(Dtype dtype) {
  return dtype == Dtype::I32 ? ArgKind::I32 : dtype == Dtype::I64 ? ArgKind::I64 : ArgKind::F32;
}

/// The checks of one launch. Messages are built only on failure: this runs on every launch.
class Binder {
 public:
  Binder(const KernelMetadata& metadata, std::span<const ParamArg> args)
      : md_(metadata), sig_(*metadata.signature), args_(args),
        dims_(sig_.runtimeDims.size(), -1), dimSource_(sig_.runtimeDims.size(), {-1, -1}) {}

  Expected<PreparedLaunch> run() {
    if (args_.size() != sig_.params.size()) {
      std::string names;
      for (size_t i = 0; i < sig_.params.size(); ++i)
        names += (i ? ", " : "") + sig_.params[i].name;
      return fail("takes " + std::to_string(sig_.params.size()) + " arguments (" + names +
                  "), got " + std::to_string(args_.size()));
    }
    // Shapes first, so a stride is only judged against sizes that are known to be right.
    for (size_t i = 0; i < args_.size(); ++i) RETURN_IF_ERROR(bindShapeOrKind(i));
    for (size_t i = 0; i < args_.size(); ++i) RETURN_IF_ERROR(checkLayout(i));
    // After the layouts, which name the tensor whose stride a bad value is.
    for (size_t i = 0; i < args_.size(); ++i) RETURN_IF_ERROR(checkMultiple(i));
    PreparedLaunch launch;
    launch.args.reserve(md_.abi.size());
    for (size_t i = 0; i < args_.size(); ++i)
      launch.args.push_back(args_[i].isTensor ? LaunchArg::pointer(args_[i].tensor.data)
                                              : args_[i].scalar);
    for (int dim : sig_.abiDims) launch.args.push_back(LaunchArg::i64(dims_[dim]));
    ASSIGN_OR_RETURN(launch.rows, rowCount());
    if (launch.rows > 0) {
      ASSIGN_OR_RETURN(launch.grid, gridForRows(md_, launch.rows));
      RETURN_IF_ERROR(checkLaunchSizes(md_, launch.args));
      for (size_t i = 0; i < args_.size(); ++i) RETURN_IF_ERROR(checkPointer(i));
      RETURN_IF_ERROR(checkOutputsDoNotOverlap());
    }
    return launch;
  }

 private:
  Status fail(const std::string& problem) const {
    return Status::error("kernel " + md_.kernel + ": " + problem);
  }
  /// "argument 'x' (0)".
  std::string argument(size_t i) const {
    return "argument '" + sig_.params[i].name + "' (" + std::to_string(i) + ")";
  }
  Status failArg(size_t i, const std::string& problem) const {
    return fail(argument(i) + ": " + problem);
  }

  Status bindShapeOrKind(size_t i) {
    const ParamSpec& spec = sig_.params[i];
    const ParamArg& arg = args_[i];
    if (!spec.isTensor) {
      if (arg.isTensor)
        return failArg(i, "expected " + scalarType(spec.dtype) + ", got a tensor " +
                              passedType(arg.tensor));
      if (arg.scalar.kind != scalarKind(spec.dtype))
        return failArg(i, "expected " + scalarType(spec.dtype) + ", got " +
                              scalarText(arg.scalar));
      return Status::ok();
    }
    if (!arg.isTensor)
      return failArg(i, "expected a tensor " + declaredType(spec) + ", got " +
                            scalarText(arg.scalar));
    const TensorArg& t = arg.tensor;
    if (dtypeBytes(t.dtype) == 0)
      return failArg(i, "has unknown dtype code " + std::to_string(static_cast<int>(t.dtype)) +
                            ", expected " + declaredType(spec));
    if (t.ndim < 0 || t.ndim > kMaxTensorDims)
      return failArg(i, "has ndim " + std::to_string(t.ndim) + ", expected " +
                            std::to_string(spec.dims.size()) + " (" + declaredType(spec) + ")");
    if (t.dtype != spec.dtype || static_cast<size_t>(t.ndim) != spec.dims.size())
      return failArg(i, "expected " + declaredType(spec) + ", got " + passedType(t));
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      const SizeSpec& size = spec.dims[d];
      int64_t got = t.sizes[d];
      auto dim = [&] { return "dim " + std::to_string(d) + " is " + std::to_string(got); };
      if (got < 0) return failArg(i, dim() + ", sizes must be >= 0");
      if (size.isConstant()) {
        if (got == size.constant) continue;
        return failArg(i, dim() + ", the kernel was compiled for " +
                              (size.name.empty() ? "" : size.name + " = ") +
                              std::to_string(size.constant) + " (" + declaredType(spec) + ")");
      }
      auto& [param, paramDim] = dimSource_[size.runtimeDim];
      int64_t& value = dims_[size.runtimeDim];
      if (param < 0) {
        if (int64_t m = sig_.dimMultiples[size.runtimeDim]; m > 1 && got % m != 0)
          return failArg(i, dim() + ", not a multiple of " + std::to_string(m) + ": the kernel steps " +
                                "vector accesses by " + size.name + " (" + declaredType(spec) + ")");
        value = got;
        param = static_cast<int>(i);
        paramDim = static_cast<int>(d);
      } else if (value != got) {
        return failArg(i, dim() + ", but " + size.name + " is " + std::to_string(value) +
                              " from " + argument(param) + " dim " + std::to_string(paramDim));
      }
    }
    return Status::ok();
  }

  /// Integer scalars that the kernel steps vector accesses by (strides) must keep them aligned.
  /// (Those it divides by are held to their minimum where rows run: checkLaunchSizes.)
  Status checkMultiple(size_t i) const {
    const ParamSpec& spec = sig_.params[i];
    if (spec.isTensor || spec.multipleOf <= 1) return Status::ok();
    int64_t value = integerValue(args_[i].scalar);
    if (value % spec.multipleOf == 0) return Status::ok();
    return fail(argument(i) + " is " + std::to_string(value) + ", not a multiple of " +
                std::to_string(spec.multipleOf) + " (the kernel steps vector accesses by it)");
  }

  /// Strides of dims of size 1 are exempt (their index is always 0; frameworks give them any
  /// stride), and so is a tensor without elements (never accessed).
  Status checkLayout(size_t i) {
    const ParamSpec& spec = sig_.params[i];
    if (!spec.isTensor) return Status::ok();
    const TensorArg& t = args_[i].tensor;
    std::span<const int64_t> sizes(t.sizes.data(), t.ndim);
    if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return Status::ok();
    int64_t inner = 1;  // the row-major stride of dim d: the product of the sizes after it
    for (size_t d = spec.dims.size(); d-- > 0;) {
      int64_t stride = t.strides[d];
      const StrideSpec& want = spec.strides[d];
      auto where = [&] {
        return "stride " + std::to_string(d) + " is " + std::to_string(stride);
      };
      if (sizes[d] != 1) {
        switch (want.kind) {
          case StrideSpec::Kind::Any: break;
          case StrideSpec::Kind::Constant:
            if (stride != want.constant)
              return failArg(i, where() + ", the kernel was compiled for " +
                                    std::to_string(want.constant) + " (strides [" +
                                    join(std::span(t.strides.data(), t.ndim)) + "])");
            break;
          case StrideSpec::Kind::RowMajor:
            if (stride != inner)
              return failArg(i, where() + ", expected " + std::to_string(inner) +
                                    ": the kernel reads it as a contiguous row-major " +
                                    declaredType(spec) + " (strides [" +
                                    join(std::span(t.strides.data(), t.ndim)) + "])");
            break;
          case StrideSpec::Kind::Param: {
            const ParamSpec& carrier = sig_.params[want.paramIndex];
            int64_t passed = integerValue(args_[want.paramIndex].scalar);
            if (stride != passed)
              return failArg(i, where() + ", but " + argument(want.paramIndex) + ", which the " +
                                    "kernel uses as this stride, is " + std::to_string(passed));
            if (carrier.multipleOf > 1 && stride % carrier.multipleOf != 0)
              return failArg(i, where() + " (" + want.param + "), not a multiple of " +
                                    std::to_string(carrier.multipleOf) +
                                    " (the kernel steps vector accesses by it)");
            break;
          }
        }
      }
      // Saturates: no tensor in memory has more elements, so its strides then fail anyway.
      if (__builtin_mul_overflow(inner, sizes[d], &inner))
        inner = std::numeric_limits<int64_t>::max();
    }
    return Status::ok();
  }

  Expected<int64_t> rowCount() const {
    int64_t rows = 1;
    for (const SizeSpec& extent : sig_.rows) {
      int64_t n = extent.isConstant() ? extent.constant : dims_[extent.runtimeDim];
      if (__builtin_mul_overflow(rows, n, &rows))
        return fail("the row space overflows 64 bits");
    }
    return rows;
  }

  /// What checkLaunchArgs requires of every pointer, named as a tensor. Only checked when there
  /// are rows to launch: an empty batch is where frameworks hand out null pointers.
  Status checkPointer(size_t i) const {
    if (!args_[i].isTensor) return Status::ok();
    uintptr_t address = reinterpret_cast<uintptr_t>(args_[i].tensor.data);
    if (address == 0) return fail(argument(i) + " is a null pointer");
    // The generated code issues vector loads/stores of `alignment` bytes on every pointer.
    if (address % md_.alignment != 0)
      return failArg(i, "pointer " + hexAddress(address) + " is not " +
                            std::to_string(md_.alignment) + "-byte aligned");
    return Status::ok();
  }

  /// [first, last) bytes a tensor's elements span; empty when it has none. A negative stride
  /// (a stride parameter may be one) extends the span below the pointer.
  std::pair<uintptr_t, uintptr_t> bytes(size_t i) const {
    const TensorArg& t = args_[i].tensor;
    __int128 low = 0, high = 0;
    for (int d = 0; d < t.ndim; ++d) {
      if (t.sizes[d] == 0) return {0, 0};
      __int128 reach = static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
      (reach < 0 ? low : high) += reach;
    }
    __int128 base = static_cast<__int128>(reinterpret_cast<uintptr_t>(t.data));
    int width = dtypeBytes(t.dtype);
    return {static_cast<uintptr_t>(base + low * width),
            static_cast<uintptr_t>(base + (high + 1) * width)};
  }

  /// Outputs are written while inputs are read, in no order between programs, so an output
  /// sharing memory with another tensor gives a result that depends on scheduling. The check
  /// compares address ranges, O(tensors^2) with a handful of tensors: it is exact for
  /// contiguous tensors and conservative for strided views, rejecting interleaved views of one
  /// buffer (such as two columns of mixed_qkv) that share a range but no element. Inputs may
  /// overlap each other: passing one table twice is how callers share it.
  Status checkOutputsDoNotOverlap() const {
    for (size_t i = 0; i < args_.size(); ++i) {
      if (!sig_.params[i].isTensor || !sig_.params[i].isOutput) continue;
      auto [lo, hi] = bytes(i);
      if (lo == hi) continue;
      for (size_t j = 0; j < args_.size(); ++j) {
        if (j == i || !sig_.params[j].isTensor) continue;
        if (sig_.params[j].isOutput && j < i) continue;  // that pair was checked from j
        auto [otherLo, otherHi] = bytes(j);
        if (otherLo == otherHi || hi <= otherLo || otherHi <= lo) continue;
        return fail(argument(i) + " is an output and its memory [" + hexAddress(lo) + ", " +
                    hexAddress(hi) + ") overlaps " + argument(j) + " [" + hexAddress(otherLo) +
                    ", " + hexAddress(otherHi) + ")");
      }
    }
    return Status::ok();
  }

  const KernelMetadata& md_;
  const KernelSignature& sig_;
  std::span<const ParamArg> args_;
  std::vector<int64_t> dims_;                     // runtime sizes, by KernelSignature::runtimeDims
  std::vector<std::pair<int, int>> dimSource_;    // where each was first seen: param, dim
};

}  // namespace

TensorArg TensorArg::view(const void* data, Dtype dtype, std::span<const int64_t> sizes,
                          std::span<const int64_t> strides) {
  TensorArg t;
  t.data = data;
  t.dtype = dtype;
  // A rank the struct cannot hold stays visible as an ndim that fails the launch checks.
  t.ndim = static_cast<int32_t>(sizes.size() == strides.size() ? sizes.size() : -1);
  for (size_t d = 0; d < sizes.size() && d < kMaxTensorDims; ++d) t.sizes[d] = sizes[d];
  for (size_t d = 0; d < strides.size() && d < kMaxTensorDims; ++d) t.strides[d] = strides[d];
  return t;
}

TensorArg TensorArg::contiguous(const void* data, Dtype dtype, std::span<const int64_t> sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  return view(data, dtype, sizes, strides);
}

Expected<PreparedLaunch> prepareLaunch(const KernelMetadata& metadata,
                                       std::span<const ParamArg> params) {
  if (!metadata.signature)
    return Status::error("kernel " + metadata.kernel +
                         ": its metadata has no 'params' and 'rows' (written by an older "
                         "compiler); recompile it to launch from tensors, or launch with raw "
                         "arguments");
  return Binder(metadata, params).run();
}

Status LoadedKernel::launchTensors(void* stream, std::span<const ParamArg> params) const {
  ASSIGN_OR_RETURN(PreparedLaunch prepared, prepareLaunch(metadata_, params));
  if (prepared.rows == 0) return Status::ok();  // an empty batch: nothing to do
  return launch(prepared.grid, stream, prepared.args);
}

}  // namespace mxfp6::rt
