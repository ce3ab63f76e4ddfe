// The C ABI's handle structs (client/mxfp6_client.h) that more than one of its source files
// reach into. Internal: not part of the C ABI.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "client/client.h"

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

namespace mxfp6::client {

/// Writes `message` into a caller's error buffer, truncated and NUL-terminated.
inline void setError(char* error, size_t size, const std::string& message) {
  if (error == nullptr || size == 0) return;
  size_t n = std::min(size - 1, message.size());
  std::memcpy(error, message.data(), n);
  error[n] = '\0';
}

}  // namespace mxfp6::client
