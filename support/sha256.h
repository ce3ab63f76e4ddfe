// SHA-256 (FIPS 180-4): the content address of code objects in the database and in the client's
// node cache, and of DSL sources. Small and dependency-free so the runtime side (the client a
// training process loads) needs no crypto library.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace mxfp6 {

class Sha256 {
 public:
  Sha256();
  void update(std::span<const std::byte> data);
  void update(std::string_view data);
  /// The digest; the object must not be updated afterwards.
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t length_ = 0;
};

/// Lower-case hex digest of `data` (64 characters).
std::string sha256Hex(std::span<const std::byte> data);
std::string sha256Hex(std::string_view data);

}  // namespace mxfp6
