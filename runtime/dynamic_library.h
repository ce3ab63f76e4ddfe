// A dlopen'ed shared library: the only way the runtime reaches a GPU driver.
#pragma once

#include <string>

#include "support/status.h"

namespace mxfp6::rt {

class DynamicLibrary {
 public:
  /// Loads `path` (a file path or a soname searched the usual way) with RTLD_NOW | RTLD_LOCAL.
  /// The error carries dlerror()'s reason, without the path it usually repeats.
  static Expected<DynamicLibrary> open(const std::string& path);

  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;
  ~DynamicLibrary();

  /// The address of `name`, or nullptr when the library does not export it.
  void* symbol(const char* name) const;
  const std::string& path() const { return path_; }

  /// Keeps the library mapped for the life of the process. Called once a driver has been
  /// initialised: GPU drivers start threads and register exit handlers that would run code from
  /// an unmapped library if it were closed.
  void keepLoaded() { keepLoaded_ = true; }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_ = nullptr;
  std::string path_;
  bool keepLoaded_ = false;
};

}  // namespace mxfp6::rt
