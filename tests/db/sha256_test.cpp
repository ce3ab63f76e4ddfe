// SHA-256 against the FIPS 180-4 example vectors (NIST CSRC "SHA256.pdf", "SHA2_Additional.pdf").
#include <gtest/gtest.h>

#include <string>

#include "support/sha256.h"

namespace mxfp6 {
namespace {

TEST(Sha256, EmptyMessage) {
  EXPECT_EQ(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256, OneBlockMessageAbc) {
  EXPECT_EQ(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256, TwoBlockMessage448Bits) {
  EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, OneMillionA) {
  EXPECT_EQ(sha256Hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// The same million bytes fed in uneven pieces: the buffering across update() calls must not
// change the digest.
TEST(Sha256, IncrementalUpdatesMatchOneShot) {
  std::string message(1000000, 'a');
  Sha256 hash;
  size_t offset = 0;
  for (size_t piece = 1; offset < message.size(); piece = piece * 3 % 197 + 1) {
    size_t take = std::min(piece, message.size() - offset);
    hash.update(std::string_view(message).substr(offset, take));
    offset += take;
  }
  std::string hex;
  for (uint8_t b : hash.finish()) {
    static constexpr char kHex[] = "0123456789abcdef";
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  EXPECT_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundary (55, 56, 63, 64 bytes) take the one- and two-block paths.
TEST(Sha256, PaddingBoundaries) {
  EXPECT_EQ(sha256Hex(std::string(55, 'a')),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  EXPECT_EQ(sha256Hex(std::string(56, 'a')),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  EXPECT_EQ(sha256Hex(std::string(64, 'a')),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

}  // namespace
}  // namespace mxfp6
