// The C ABI's handle structs (client/mxfp6_client.h) that more than one of its source files
// reach into. Internal: not part of the C ABI.
#pragma once

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "client/call_cache.h"
#include "client/client.h"
#include "runtime/mxfp6rt.h"

struct mxc_resolution {
  mxfp6::client::Resolution resolution;
  struct Entry {
    std::string key;
    const mxfp6::client::ResolvedOp* op = nullptr;  // null: failed
    std::string error;
    std::string planJson;
  };
  std::vector<Entry> entries;
};

/// One op's plan with its code objects' launch metadata, independent of where it came from (a
/// resolution: mxc_op_create; objects at hand: mxc_op_from_plan).
struct mxc_op {
  std::string key;                                     // the key's text
  mxfp6::ops::Problem problem;                         // the key's problem (variant, size, heads, samples)
  mxfp6::ops::Plan plan;
  std::string planId;
  std::vector<mxfp6::client::Object> objects;          // per launch
  std::vector<mxfp6::rt::KernelMetadata> metadata;     // per launch
  mxrt_device* device = nullptr;                       // where `kernels` are loaded
  std::vector<std::unique_ptr<mxfp6::rt::LoadedKernel>> kernels;
  std::set<std::string> tensorNames, scalarNames;      // the op's arguments (ops::declareArgs), once
  uint32_t alignment = 1;                              // the largest of its kernels' pointer alignments
  mutable mxfp6::client::CallCache calls;              // checked launches per call signature (mxc_op_launch)
};

namespace mxfp6::client {

/// The op of `plan` for a key with one code object per launch: the key's problem, the op's
/// declared argument names, each object's launch metadata (of this client's schema). Errors
/// (a key that does not fit its op, a count of objects other than the launches, metadata of
/// another schema) leave naming the key to the caller.
Expected<std::unique_ptr<mxc_op>> makeOp(const std::string& keyText, const OpKey& key, ops::Plan plan,
                                         std::string planId, std::vector<Object> objects);

/// Copies `text` into out when it fits (with its NUL); returns the size it needs.
inline size_t copyOut(const std::string& text, char* out, size_t outSize) {
  if (out != nullptr && outSize > text.size()) std::memcpy(out, text.c_str(), text.size() + 1);
  return text.size() + 1;
}

/// Writes `message` into a caller's error buffer, truncated and NUL-terminated.
inline void setError(char* error, size_t size, const std::string& message) {
  if (error == nullptr || size == 0) return;
  size_t n = std::min(size - 1, message.size());
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

}  // namespace mxfp6::client
