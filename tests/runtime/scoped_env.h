// Sets (or unsets, with nullptr) an environment variable for one scope, so a test of the driver
// search neither depends on nor leaks MXFP6_GPU_DRIVER / FAKE_CUDA_DEVICES.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace mxfp6::rt::testing {

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_.c_str(), old_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace mxfp6::rt::testing
