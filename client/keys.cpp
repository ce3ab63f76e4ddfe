// Keys for other languages (client/mxfp6_client.h, mxc_shape_set_keys and mxc_call_key): spelled
// by the same code the command line and the server use (ops/shape_set.h, ops/compose.h
// problemOf, client::keyOf), so a binding never re-derives a key's fields.
#include <cstring>
#include <set>
#include <string>

#include "client/c_handles.h"
#include "client/client.h"
#include "client/mxfp6_client.h"
#include "ops/compose.h"
#include "ops/shape_set.h"

namespace {

using mxfp6::client::copyOut;
using mxfp6::client::setError;
namespace ops = mxfp6::ops;

}  // namespace

extern "C" {

size_t mxc_shape_set_keys(const char* json, const char* target, char* out, size_t out_size, char* error,
                          size_t error_size) {
  try {
    auto entries = ops::parseShapeSet(json ? json : "", "shape set");
    if (!entries) return setError(error, error_size, entries.status().message()), 0;
    std::string keys;
    std::set<std::string> seen;
    for (const ops::ShapeEntry& e : *entries) {
      std::string key = mxfp6::client::keyOf(e.problem, target ? target : "").text();
      if (seen.insert(key).second) keys += key + "\n";
    }
    return copyOut(keys, out, out_size);
  } catch (const std::exception& e) {
    return setError(error, error_size, e.what()), 0;
  }
}

size_t mxc_call_key(const char* op, const char* variant, const char* target, const mxc_named_tensor* tensors,
                    size_t n_tensors, const mxc_named_scalar* scalars, size_t n_scalars, char* out, size_t out_size,
                    char* error, size_t error_size) {
  try {
    const ops::OpSpec* spec = ops::findOp(op ? op : "");
    if (spec == nullptr) return setError(error, error_size, std::string("unknown op '") + (op ? op : "") + "'"), 0;
    auto given = ops::parseConfig(variant ? variant : "");
    if (!given) return setError(error, error_size, given.status().message()), 0;
    ops::OpCall call;
    for (size_t i = 0; i < n_tensors; ++i) {
      const mxrt_tensor& t = tensors[i].tensor;
      if (t.ndim < 0 || t.ndim > MXRT_MAX_DIMS)
        return setError(error, error_size, std::string("argument '") + tensors[i].name + "' has a bad rank"), 0;
      mxfp6::rt::TensorArg arg;
      arg.data = t.data;
      arg.dtype = static_cast<mxfp6::rt::Dtype>(t.dtype);
      arg.ndim = t.ndim;
      for (int d = 0; d < t.ndim; ++d) arg.sizes[d] = t.sizes[d], arg.strides[d] = t.strides[d];
      call.tensors[tensors[i].name ? tensors[i].name : ""] = arg;
    }
    for (size_t i = 0; i < n_scalars; ++i) call.scalars[scalars[i].name ? scalars[i].name : ""] = scalars[i].value;
    auto problem = ops::problemOf(*spec, *given, call);
    if (!problem) return setError(error, error_size, problem.status().message()), 0;
    return copyOut(mxfp6::client::keyOf(*problem, target ? target : "").text(), out, out_size);
  } catch (const std::exception& e) {
    return setError(error, error_size, e.what()), 0;
  }
}

}  // extern "C"
