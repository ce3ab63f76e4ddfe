#include "compiler/interp/mxfp6.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "compiler/interp/float_formats.h"
#include "compiler/interp/ranges.h"

namespace mxfp6::mx {
namespace {

/// The constants of one element format (spec "Elements" and "Scales").
struct Format {
  int emax;          // exponent of the largest normal
  int emin;          // exponent of the smallest normal
  int mantissaBits;  // MB
  int rceilM7;       // RC: RCEIL adds 1 when the amax's 7 mantissa bits exceed it
  int evenM7;        // EV: EVEN adds 1 when they reach it
};

constexpr Format kE2M3{2, 0, 3, 112, 120};
constexpr Format kE3M2{4, -2, 2, 96, 112};

const Format& formatOf(ElementFormat format) {
  return format == ElementFormat::E2M3 ? kE2M3 : kE3M2;
}

constexpr uint8_t kMaxCode = 0x1F;
constexpr uint8_t kSignBit = 0x20;

bool isBf16NanOrInf(uint16_t bits) { return (bits & 0x7F80) == 0x7F80; }
uint8_t bf16Sign(uint16_t bits) { return (bits & 0x8000) != 0 ? kSignBit : 0; }

/// Rounds t >= 0 (exact in double) to the nearest integer, ties to even, independent of the FP
/// environment's rounding mode.
double roundHalfEven(double t) {
  const double fl = std::floor(t);
  const double frac = t - fl;  // exact: t and fl share a binade or fl is 0
  if (frac > 0.5 || (frac == 0.5 && std::fmod(fl, 2.0) != 0.0)) return fl + 1.0;
  return fl;
}

/// The spec's encode on a finite double (exact y):
///   e  = floor_log2(a); qe = max(e, EMIN) - MB        grid step 2^qe
///   r  = round_half_even(a * 2^-qe)
///   cm = (max(e - EMIN + 1, 0) << MB) + r - (e >= EMIN ? 1 << MB : 0)
///   min(cm, 31) | sign
/// A carry of r to 2^(MB+1) rolls into the exponent field. a >= 2^(EMAX+1) saturates before the
/// arithmetic so the integers stay small.
uint8_t encodeFinite(double y, const Format& f) {
  const uint8_t sign = std::signbit(y) ? kSignBit : 0;
  const double a = std::fabs(y);
  if (a == 0.0) return sign;
  const int e = std::ilogb(a);
  if (e > f.emax) return kMaxCode | sign;
  const int qe = std::max(e, f.emin) - f.mantissaBits;
  const int64_t r = static_cast<int64_t>(roundHalfEven(std::ldexp(a, -qe)));
  const int64_t cm = (static_cast<int64_t>(std::max(e - f.emin + 1, 0)) << f.mantissaBits) + r -
                     (e >= f.emin ? int64_t{1} << f.mantissaBits : 0);
  return static_cast<uint8_t>(std::min<int64_t>(cm, kMaxCode)) | sign;
}

uint8_t encodeDouble(double y, const Format& f) {
  if (!std::isfinite(y)) return kMaxCode | (std::signbit(y) ? kSignBit : 0);
  return encodeFinite(y, f);
}

Status checkShape(std::span<const uint16_t> x, int64_t rows, int64_t cols) {
  if (rows < 0 || cols < 0) {
    return Status::error("mxfp6 pack: negative shape [" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "]");
  }
  if (cols != 0 && rows > std::numeric_limits<int64_t>::max() / cols) {
    return Status::error("mxfp6 pack: shape [" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "] overflows");
  }
  if (static_cast<uint64_t>(rows * cols) != x.size()) {
    return Status::error("mxfp6 pack: " + std::to_string(x.size()) +
                         " elements given for shape [" + std::to_string(rows) + ", " +
                         std::to_string(cols) + "] (" + std::to_string(rows * cols) + ")");
  }
  return Status::ok();
}

PackedBlobs emptyBlobs(int64_t rows, int64_t cols) {
  PackedBlobs b;
  b.rows = rows;
  b.cols = cols;
  const auto blocks = static_cast<size_t>(rows * b.blocksPerRow());
  b.data.assign(blocks * kPackedBlockBytes, 0);
  b.scales.assign(blocks, 0);
  return b;
}

/// Encodes `block` (<= 32 elements) and stores it as block `blockIndex` of blob row `row`.
void storeBlock(PackedBlobs& blobs, int64_t row, int64_t blockIndex,
                std::span<const uint16_t> block, ElementFormat format, ScaleMode mode) {
  uint8_t codes[kBlockSize];
  const size_t index = static_cast<size_t>(row * blobs.blocksPerRow() + blockIndex);
  blobs.scales[index] = encodeBlock(block, format, mode, codes);
  const std::array<uint8_t, kPackedBlockBytes> bytes = packBlock(codes);
  std::copy(bytes.begin(), bytes.end(), blobs.data.begin() + index * kPackedBlockBytes);
}

}  // namespace

const char* elementFormatName(ElementFormat format) {
  return format == ElementFormat::E2M3 ? "e2m3" : "e3m2";
}

Expected<ElementFormat> parseElementFormat(std::string_view name) {
  if (name == "e2m3") return ElementFormat::E2M3;
  if (name == "e3m2") return ElementFormat::E3M2;
  return Status::error("unknown MXFP6 element format '" + std::string(name) +
                       "' (expected e2m3 or e3m2)");
}

const char* scaleModeName(ScaleMode mode) {
  switch (mode) {
    case ScaleMode::Rceil: return "rceil";
    case ScaleMode::Even: return "even";
    case ScaleMode::Floor: return "floor";
  }
  return "rceil";
}

Expected<ScaleMode> parseScaleMode(std::string_view name) {
  if (name.empty() || name == "rceil") return ScaleMode::Rceil;
  if (name == "even") return ScaleMode::Even;
  if (name == "floor") return ScaleMode::Floor;
  return Status::error("unknown MXFP6 scale mode '" + std::string(name) +
                       "' (expected rceil, even or floor)");
}

uint8_t scaleByte(uint16_t amaxBf16Bits, bool blockHasNanOrInf, ElementFormat format,
                  ScaleMode mode) {
  const Format& f = formatOf(format);
  const int biasedExp = (amaxBf16Bits >> 7) & 0xFF;
  const int m7 = amaxBf16Bits & 0x7F;
  if (blockHasNanOrInf || biasedExp == 0xFF) return kNanScale;
  if (biasedExp == 0) return 0x00;
  int s = (biasedExp - 127) - f.emax;  // FLOOR
  switch (mode) {
    case ScaleMode::Rceil: s += m7 > f.rceilM7 ? 1 : 0; break;
    case ScaleMode::Even: s += m7 >= f.evenM7 ? 1 : 0; break;
    case ScaleMode::Floor: break;
  }
  return static_cast<uint8_t>(std::clamp(s, -127, 127) + 127);
}

uint8_t encodeElement(float y, ElementFormat format) {
  return encodeDouble(static_cast<double>(y), formatOf(format));
}

uint8_t encodeBf16Element(uint16_t xBf16, uint8_t scale, ElementFormat format) {
  if (scale == kNanScale || isBf16NanOrInf(xBf16)) return kMaxCode | bf16Sign(xBf16);
  // |x| < 2^128 and |s| <= 127: x * 2^-s is exact in double.
  const double y = std::ldexp(interp::bf16ToDouble(xBf16), 127 - static_cast<int>(scale));
  return encodeFinite(y, formatOf(format));
}

uint8_t encodeBlock(std::span<const uint16_t> bf16Block, ElementFormat format, ScaleMode mode,
                    uint8_t codes[32]) {
  const size_t n = std::min<size_t>(bf16Block.size(), kBlockSize);
  // On the magnitude bits, integer order is value order for finite bf16.
  uint16_t amax = 0;
  bool hasNanOrInf = false;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t bits = bf16Block[i];
    if (isBf16NanOrInf(bits)) {
      hasNanOrInf = true;
    } else {
      amax = std::max<uint16_t>(amax, bits & 0x7FFF);
    }
  }
  const uint8_t scale = scaleByte(amax, hasNanOrInf, format, mode);
  for (size_t i = 0; i < kBlockSize; ++i) {
    codes[i] = encodeBf16Element(i < n ? bf16Block[i] : uint16_t{0}, scale, format);
  }
  return scale;
}

double decodeElement(uint8_t code, ElementFormat format) {
  const Format& f = formatOf(format);
  const int exponentField = (code & kMaxCode) >> f.mantissaBits;
  const int mantissa = code & ((1 << f.mantissaBits) - 1);
  // bias = 1 - EMIN; subnormals share the smallest normal's exponent.
  const double magnitude =
      exponentField == 0
          ? std::ldexp(mantissa, f.emin - f.mantissaBits)
          : std::ldexp((1 << f.mantissaBits) + mantissa,
                       exponentField - 1 + f.emin - f.mantissaBits);
  return (code & kSignBit) != 0 ? -magnitude : magnitude;
}

double decodeScale(uint8_t scale) {
  if (scale == kNanScale) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(scale) - 127);
}

std::array<uint8_t, 3> pack4(uint8_t c0, uint8_t c1, uint8_t c2, uint8_t c3) {
  const uint32_t w = (c0 & 0x3Fu) | (c1 & 0x3Fu) << 6 | (c2 & 0x3Fu) << 12 | (c3 & 0x3Fu) << 18;
  return {static_cast<uint8_t>(w & 0xFF), static_cast<uint8_t>((w >> 8) & 0xFF),
          static_cast<uint8_t>((w >> 16) & 0xFF)};
}

std::array<uint8_t, 4> unpack4(const uint8_t bytes[3]) {
  const uint32_t w = bytes[0] | static_cast<uint32_t>(bytes[1]) << 8 |
                     static_cast<uint32_t>(bytes[2]) << 16;
  return {static_cast<uint8_t>(w & 0x3F), static_cast<uint8_t>((w >> 6) & 0x3F),
          static_cast<uint8_t>((w >> 12) & 0x3F), static_cast<uint8_t>((w >> 18) & 0x3F)};
}

std::array<uint8_t, 24> packBlock(const uint8_t codes[32]) {
  std::array<uint8_t, 24> out{};
  for (int g = 0; g < 8; ++g) {
    const auto b = pack4(codes[4 * g], codes[4 * g + 1], codes[4 * g + 2], codes[4 * g + 3]);
    std::copy(b.begin(), b.end(), out.begin() + 3 * g);
  }
  return out;
}

std::array<uint8_t, 32> unpackBlock(const uint8_t bytes[24]) {
  std::array<uint8_t, 32> codes{};
  for (int g = 0; g < 8; ++g) {
    const auto c = unpack4(bytes + 3 * g);
    std::copy(c.begin(), c.end(), codes.begin() + 4 * g);
  }
  return codes;
}

Expected<PackedBlobs> packRows(std::span<const uint16_t> x, int64_t rows, int64_t cols,
                               ElementFormat format, ScaleMode mode, int threads) {
  RETURN_IF_ERROR(checkShape(x, rows, cols));
  PackedBlobs out = emptyBlobs(rows, cols);
  interp::inRanges(rows, threads, [&](int64_t, int64_t first, int64_t last) {
    for (int64_t r = first; r < last; ++r) {
      for (int64_t b = 0; b < out.blocksPerRow(); ++b) {
        const int64_t c0 = b * kBlockSize;
        const int64_t n = std::min<int64_t>(kBlockSize, cols - c0);
        storeBlock(out, r, b, x.subspan(static_cast<size_t>(r * cols + c0), static_cast<size_t>(n)),
                   format, mode);
      }
    }
  });
  return out;
}

Expected<PackedBlobs> packColumns(std::span<const uint16_t> x, int64_t rows, int64_t cols,
                                  ElementFormat format, ScaleMode mode, int threads) {
  RETURN_IF_ERROR(checkShape(x, rows, cols));
  PackedBlobs out = emptyBlobs(cols, rows);
  interp::inRanges(cols, threads, [&](int64_t, int64_t first, int64_t last) {
    uint16_t block[kBlockSize];
    for (int64_t c = first; c < last; ++c) {
      for (int64_t b = 0; b < out.blocksPerRow(); ++b) {
        const int64_t r0 = b * kBlockSize;
        const int64_t n = std::min<int64_t>(kBlockSize, rows - r0);
        for (int64_t i = 0; i < n; ++i) block[i] = x[static_cast<size_t>((r0 + i) * cols + c)];
        storeBlock(out, c, b, std::span<const uint16_t>(block, static_cast<size_t>(n)), format,
                   mode);
      }
    }
  });
  return out;
}

// One read of X: each 32x32 tile is loaded once (zero-padded past R and C) and yields the row
// blocks of its real rows and the column blocks of its real columns, as the GPU dual kernel does.
// Threads take bands of 32 rows.
Expected<DualBlobs> packDual(std::span<const uint16_t> x, int64_t rows, int64_t cols,
                             ElementFormat format, ScaleMode mode, int threads) {
  RETURN_IF_ERROR(checkShape(x, rows, cols));
  DualBlobs out{emptyBlobs(rows, cols), emptyBlobs(cols, rows)};
  interp::inRanges(out.columns.blocksPerRow(), threads, [&](int64_t, int64_t firstBand, int64_t lastBand) {
    uint16_t tile[kBlockSize][kBlockSize];
    uint16_t column[kBlockSize];
    for (int64_t rb = firstBand; rb < lastBand; ++rb) {
      for (int64_t cb = 0; cb < out.rows.blocksPerRow(); ++cb) {
        const int64_t r0 = rb * kBlockSize, c0 = cb * kBlockSize;
        const int64_t nr = std::min<int64_t>(kBlockSize, rows - r0);
        const int64_t nc = std::min<int64_t>(kBlockSize, cols - c0);
        for (int64_t i = 0; i < kBlockSize; ++i) {
          for (int64_t j = 0; j < kBlockSize; ++j) {
            tile[i][j] = i < nr && j < nc ? x[static_cast<size_t>((r0 + i) * cols + c0 + j)] : 0;
          }
        }
        for (int64_t i = 0; i < nr; ++i) storeBlock(out.rows, r0 + i, cb, tile[i], format, mode);
        for (int64_t j = 0; j < nc; ++j) {
          for (int64_t i = 0; i < kBlockSize; ++i) column[i] = tile[i][j];
          storeBlock(out.columns, c0 + j, rb, column, format, mode);
        }
      }
    }
  });
  return out;
}

Expected<std::vector<double>> decodeBlobs(const PackedBlobs& blobs, ElementFormat format) {
  if (blobs.rows < 0 || blobs.cols < 0 ||
      blobs.scales.size() != static_cast<size_t>(blobs.rows * blobs.blocksPerRow()) ||
      blobs.data.size() != blobs.scales.size() * kPackedBlockBytes) {
    return Status::error("mxfp6 decode: blobs of " + std::to_string(blobs.data.size()) +
                         " data and " + std::to_string(blobs.scales.size()) +
                         " scale bytes do not match shape [" + std::to_string(blobs.rows) +
                         ", " + std::to_string(blobs.cols) + "]");
  }
  std::vector<double> out(static_cast<size_t>(blobs.rows * blobs.cols));
  for (int64_t r = 0; r < blobs.rows; ++r) {
    for (int64_t b = 0; b < blobs.blocksPerRow(); ++b) {
      const size_t index = static_cast<size_t>(r * blobs.blocksPerRow() + b);
      const double scale = decodeScale(blobs.scales[index]);
      const std::array<uint8_t, 32> codes = unpackBlock(&blobs.data[index * kPackedBlockBytes]);
      for (int64_t i = 0; i < kBlockSize && b * kBlockSize + i < blobs.cols; ++i) {
        out[static_cast<size_t>(r * blobs.cols + b * kBlockSize + i)] =
            scale * decodeElement(codes[static_cast<size_t>(i)], format);
      }
    }
  }
  return out;
}

}  // namespace mxfp6::mx
