#include "runtime/dynamic_library.h"

#include <dlfcn.h>

#include <utility>

namespace mxfp6::rt {

Expected<DynamicLibrary> DynamicLibrary::open(const std::string& path) {
  dlerror();  // Clear a stale message so the one below belongs to this call.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* raw = dlerror();
    std::string why = raw != nullptr ? raw : "unknown dlopen error";
    // glibc writes "<path>: <reason>"; the caller already names the path.
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    return Status::error(why);
  }
  return DynamicLibrary(handle, path);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      path_(std::move(other.path_)),
      keepLoaded_(other.keepLoaded_) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr && !keepLoaded_) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
    keepLoaded_ = other.keepLoaded_;
  }
  return *this;
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr && !keepLoaded_) dlclose(handle_);
}

void* DynamicLibrary::symbol(const char* name) const {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

}  // namespace mxfp6::rt
