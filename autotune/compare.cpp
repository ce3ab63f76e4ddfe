#include "autotune/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace mxfp6::autotune {
namespace {

double load(const std::byte* base, rt::Dtype d, int64_t i) {
  switch (d) {
    case rt::Dtype::BF16: {
      uint16_t b;
      std::memcpy(&b, base + 2 * i, 2);
      uint32_t u = uint32_t(b) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case rt::Dtype::F32: {
      float f;
      std::memcpy(&f, base + 4 * i, 4);
      return f;
    }
    case rt::Dtype::U8: return double(uint8_t(base[i]));
    default: return 0;
  }
}

double ulpBf16(double v) {
  int e;
  std::frexp(std::max(std::fabs(v), 1e-38), &e);
  return std::ldexp(1.0, e - 8);
}

int64_t viewElements(const ops::TensorDecl& t) {
  if (t.viewSizes.empty()) return t.elements();
  int64_t n = 1;
  for (int64_t s : t.viewSizes) n *= s;
  return n;
}

/// Calls f(offset) for the storage offsets of the elements [begin, end) of a declared tensor's
/// view in its index order (of the whole storage when it has none), until f returns false;
/// without materializing them: outputs reach 10^8 elements.
template <typename F>
void forEachOffset(const ops::TensorDecl& t, int64_t begin, int64_t end, F&& f) {
  if (t.viewSizes.empty()) {
    for (int64_t i = begin; i < end; ++i)
      if (!f(i)) return;
    return;
  }
  if (begin >= end) return;
  // The innermost dimension is a run of unit stride in every view the ops declare.
  size_t dims = t.viewSizes.size();
  int64_t inner = t.viewSizes.back(), innerStride = t.viewStrides.back();
  std::vector<int64_t> idx(dims - 1, 0);  // the outer dimensions' index of element `begin`
  int64_t row = begin / inner, i = begin % inner;
  for (size_t d = dims - 1; d-- > 0;) {
    idx[d] = row % t.viewSizes[d];
    row /= t.viewSizes[d];
  }
  for (int64_t k = begin; k < end;) {
    int64_t base = t.viewOffset;
    for (size_t d = 0; d + 1 < dims; ++d) base += idx[d] * t.viewStrides[d];
    for (int64_t stop = std::min(inner, i + (end - k)); i < stop; ++i, ++k)
      if (!f(base + i * innerStride)) return;
    i = 0;
    for (size_t d = dims - 1; d-- > 0;) {
      if (++idx[d] < t.viewSizes[d]) break;
      idx[d] = 0;
    }
  }
}

/// The Exact and BlobsOfComputed rules: how many elements differ, and the first.
Status compareBytes(const ops::TensorDecl& t, const std::byte* r, const std::byte* o, const Chunking& chunking) {
  struct Count {
    int64_t differing = 0, first = -1;
  };
  int64_t bytes = rt::dtypeBytes(t.dtype), n = viewElements(t);
  auto counts = parallelChunks(n, chunking, [&](int64_t begin, int64_t end) {
    Count c;
    forEachOffset(t, begin, end, [&](int64_t off) {
      if (std::memcmp(r + off * bytes, o + off * bytes, bytes) != 0) {
        if (c.first < 0) c.first = off;
        ++c.differing;
      }
      return true;
    });
    return c;
  });
  int64_t differing = 0, first = -1;
  for (const Count& c : counts) {
    if (first < 0) first = c.first;  // chunks in index order: the first that found one
    differing += c.differing;
  }
  int64_t allowed = t.compare == ops::Compare::Exact ? 0 : n / 1000;
  if (differing <= allowed) return Status::ok();
  return Status::error(t.name + ": " + std::to_string(differing) + " of " + std::to_string(n) +
                       " elements differ (first at " + std::to_string(first) + ": " +
                       std::to_string(load(o, t.dtype, first)) + " vs " + std::to_string(load(r, t.dtype, first)) +
                       "), " + (allowed ? "at most " + std::to_string(allowed) + " may" : "none may"));
}

/// The Bf16 and F32 rules: every element within its bound; the first that is not, named.
Status compareBounded(const ops::TensorDecl& t, const std::byte* r, const std::byte* o, double scale,
                      const Chunking& chunking) {
  struct Failure {
    bool found = false;
    int64_t off = 0;
    double a = 0, b = 0, bound = 0;
  };
  auto failures = parallelChunks(viewElements(t), chunking, [&](int64_t begin, int64_t end) {
    Failure f;
    forEachOffset(t, begin, end, [&](int64_t off) {
      double a = load(o, t.dtype, off), b = load(r, t.dtype, off);
      double bound = t.compare == ops::Compare::Bf16 ? ulpBf16(b) + std::ldexp(scale, -16)
                                                     : std::ldexp(std::fabs(b), -18) + std::ldexp(scale, -20);
      if (std::fabs(a - b) <= bound) return true;  // NaN (an unwritten, poisoned element) fails
      f = {true, off, a, b, bound};
      return false;
    });
    return f;
  });
  for (const Failure& f : failures)  // chunks in index order: the first that found one
    if (f.found)
      return Status::error(t.name + ": element " + std::to_string(f.off) + " is " + std::to_string(f.a) +
                           ", the reference " + std::to_string(f.b) + " (bound " + std::to_string(f.bound) + ")");
  return Status::ok();
}

bool bounded(ops::Compare c) { return c == ops::Compare::Bf16 || c == ops::Compare::F32; }

}  // namespace

std::vector<double> referenceScales(const ops::OpArgs& args, const std::vector<std::vector<std::byte>>& ref,
                                    const Chunking& chunking) {
  std::vector<double> scales(args.tensors.size(), 0.0);
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    const ops::TensorDecl& t = args.tensors[i];
    if (!t.output || !bounded(t.compare)) continue;
    const std::byte* r = ref[i].data();
    // std::max keeps its first argument against a NaN, so NaNs never count, in any order.
    for (double m : parallelChunks(viewElements(t), chunking, [&](int64_t begin, int64_t end) {
           double s = 0;
           forEachOffset(t, begin, end, [&](int64_t off) {
             s = std::max(s, std::fabs(load(r, t.dtype, off)));
             return true;
           });
           return s;
         }))
      scales[i] = std::max(scales[i], m);
  }
  return scales;
}

Status compareOutputs(const ops::OpArgs& args, const std::vector<std::vector<std::byte>>& ref,
                      const std::vector<double>& scales, const std::vector<std::vector<std::byte>>& out,
                      const Chunking& chunking) {
  for (size_t i = 0; i < args.tensors.size(); ++i) {
    const ops::TensorDecl& t = args.tensors[i];
    if (!t.output) continue;
    if (sameBytes(ref[i], out[i], chunking)) continue;  // identical storage: nothing to bound
    Status s = bounded(t.compare) ? compareBounded(t, ref[i].data(), out[i].data(), scales[i], chunking)
                                  : compareBytes(t, ref[i].data(), out[i].data(), chunking);
    if (!s) return s;
  }
  return Status::ok();
}

bool sameBytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b, const Chunking& chunking) {
  if (a.size() != b.size()) return false;
  for (int same : parallelChunks(int64_t(a.size()), chunking, [&](int64_t begin, int64_t end) {
         return int(end == begin || std::memcmp(a.data() + begin, b.data() + begin, size_t(end - begin)) == 0);
       }))
    if (!same) return false;
  return true;
}

}  // namespace mxfp6::autotune
