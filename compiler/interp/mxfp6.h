// The CPU reference encoder of MXFP6 (docs/mxfp6-format.md is normative): E2M3/E3M2 elements, one E8M0
// scale byte per 32-element block in three scale modes, LSB-first 6-bit packing, and the row,
// column and dual layouts of a bf16 tensor. GPU packers are tested byte for byte against it, so
// it follows the spec bit for bit. Plain C++ (no LLVM); errors are Status values, never exceptions.
//
// Contract shared with the GPU kernels:
//   - Blocks are 32 consecutive elements of a row (of X for row blobs, of Xᵀ for column blobs).
//   - R or C not a multiple of 32: the last block of a row is ZERO-PADDED, exactly as if X were
//     extended with +0.0 elements. +0 never raises the amax, so the scale is that of the real
//     elements; the pad elements encode as +0 (code 0x00), except in a NaN/Inf block where every
//     element of the block, padding included, is written as sign|0x1F (0x1F for the +0 padding).
//     Blobs therefore have ceil(C/32) blocks per row; nothing is rejected for its shape.
//   - amax is the largest |x| of the block taken on the bf16 bits (max of bits & 0x7FFF over
//     finite elements); a NaN or Inf anywhere in the block gives scale 0xFF.
//   - y = x * 2^-s is computed exactly (in double here; fp32 with denormals kept gives the same
//     codes), then rounded to nearest even, saturating, keeping subnormals and the sign of zero.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace mxfp6::mx {

enum class ElementFormat { E2M3, E3M2 };

/// How the block exponent is chosen from the amax (spec "Scales"). Rceil is the default
/// everywhere (a value-initialised ScaleMode is Rceil): it never saturates the block maximum.
enum class ScaleMode { Rceil, Even, Floor };

inline constexpr int kBlockSize = 32;        // elements per block
inline constexpr int kPackedBlockBytes = 24; // 32 codes * 6 bits
inline constexpr uint8_t kNanScale = 0xFF;   // E8M0 NaN: the scale of a block holding NaN/Inf

/// "e2m3" / "e3m2".
const char* elementFormatName(ElementFormat format);
/// Parses "e2m3" / "e3m2".
Expected<ElementFormat> parseElementFormat(std::string_view name);
/// "rceil" / "even" / "floor".
const char* scaleModeName(ScaleMode mode);
/// Parses "rceil" / "even" / "floor" (an empty string is the default, "rceil").
Expected<ScaleMode> parseScaleMode(std::string_view name);

// ---------------------------------------------------------------------------------------------
// Scales and elements

/// The spec's scale_byte: the E8M0 scale of a block from the bf16 bits of its amax. The sign bit
/// of `amaxBf16Bits` is ignored. A zero or subnormal amax gives 0x00; the result is clamped to
/// [-127, 127] + 127, so a finite amax never yields 0xFE or 0xFF. amax bits with an all-ones
/// exponent (Inf/NaN) are treated as blockHasNanOrInf: an amax taken as the integer max of the
/// magnitude bits sees the NaN/Inf itself.
uint8_t scaleByte(uint16_t amaxBf16Bits, bool blockHasNanOrInf, ElementFormat format,
                  ScaleMode mode = ScaleMode::Rceil);

/// The spec's encode of y = x * 2^-s into a 6-bit code (sign in bit 5): round to nearest, ties
/// to even, saturating to +-max (code 0x1F/0x3F), subnormals kept, -0 -> 0x20. Not part of the
/// spec, for totality: +-Inf saturates to sign|0x1F, and NaN gives sign|0x1F as in a NaN block.
uint8_t encodeElement(float y, ElementFormat format);

/// Encodes one bf16 element of a block whose scale byte is `scaleByte`: encodeElement of
/// x * 2^-(scaleByte-127), computed exactly (no flush to zero, no intermediate overflow). With
/// scale 0xFF (NaN/Inf block), or if x itself is NaN/Inf, the code is sign(x)|0x1F.
uint8_t encodeBf16Element(uint16_t xBf16, uint8_t scaleByte, ElementFormat format);

/// Encodes one block: up to 32 bf16 elements (fewer are zero-padded to 32; only the first 32 of
/// a longer span are read). Writes all 32 codes and returns the scale byte.
uint8_t encodeBlock(std::span<const uint16_t> bf16Block, ElementFormat format, ScaleMode mode,
                    uint8_t codes[32]);

/// The value of a 6-bit code (bits above 5 ignored), exact.
double decodeElement(uint8_t code, ElementFormat format);
/// 2^(byte-127); 0xFF -> NaN.
double decodeScale(uint8_t scaleByte);

// ---------------------------------------------------------------------------------------------
// Packing (spec "Packing"): element i of a block occupies bits [6i, 6i+6) of its 24 bytes, LSB
// first; four codes form w = c0 | c1<<6 | c2<<12 | c3<<18, stored as w's bytes low to high.
// Codes are masked to 6 bits.

std::array<uint8_t, 3> pack4(uint8_t c0, uint8_t c1, uint8_t c2, uint8_t c3);
std::array<uint8_t, 4> unpack4(const uint8_t bytes[3]);
std::array<uint8_t, 24> packBlock(const uint8_t codes[32]);
std::array<uint8_t, 32> unpackBlock(const uint8_t bytes[24]);

// ---------------------------------------------------------------------------------------------
// Whole tensors. X is row-major bf16 bits, X[r, c] = x[r * cols + c].

/// One orientation of a packed tensor: `rows` blob rows, each `cols` logical elements in
/// blocksPerRow() = ceil(cols / 32) blocks (the last one zero-padded).
struct PackedBlobs {
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> data;    // [rows, blocksPerRow(), 24], row pitch 24 * blocksPerRow()
  std::vector<uint8_t> scales;  // [rows, blocksPerRow()]

  int64_t blocksPerRow() const { return (cols + kBlockSize - 1) / kBlockSize; }
  bool operator==(const PackedBlobs&) const = default;
};

struct DualBlobs {
  PackedBlobs rows;     // packRows(X)
  PackedBlobs columns;  // packColumns(X)
};

// The packers below split their blocks among `threads` threads (at least 1); the blobs are the
// same bytes for any count. The GPU tests' references are operands of hundreds of MB.

/// Row blobs of X[R, C]: data [R, ceil(C/32), 24], scales [R, ceil(C/32)].
/// Errors: a negative dimension, or x.size() != rows * cols.
Expected<PackedBlobs> packRows(std::span<const uint16_t> x, int64_t rows, int64_t cols,
                               ElementFormat format, ScaleMode mode = ScaleMode::Rceil, int threads = 1);

/// Column blobs of X[R, C], i.e. the row blobs of Xᵀ: data [C, ceil(R/32), 24],
/// scales [C, ceil(R/32)].
Expected<PackedBlobs> packColumns(std::span<const uint16_t> x, int64_t rows, int64_t cols,
                                  ElementFormat format, ScaleMode mode = ScaleMode::Rceil, int threads = 1);

/// Both from one pass over X in 32x32 tiles; byte-identical to packRows and packColumns.
Expected<DualBlobs> packDual(std::span<const uint16_t> x, int64_t rows, int64_t cols,
                             ElementFormat format, ScaleMode mode = ScaleMode::Rceil, int threads = 1);

/// Dequantises blobs back to [blobs.rows, blobs.cols] row-major doubles (padding dropped):
/// decodeScale(scale) * decodeElement(code), NaN for every element of a 0xFF-scale block.
/// Error: data/scales sizes that do not match rows, cols.
Expected<std::vector<double>> decodeBlobs(const PackedBlobs& blobs, ElementFormat format);

}  // namespace mxfp6::mx
