// What a tuned plan is stored and looked up by (docs/architecture.md, "Keys"): every field that
// changes the code or the best plan, and nothing else. A field missing here is a silent wrong
// kernel; a needless one re-tunes for nothing.
#pragma once

#include <cstdint>
#include <string>

namespace mxfp6::autotune {

/// The shape-free part of a key: a family of keys that differ only in their row count M. The
/// nearest-M rule of resolution searches within one family.
struct FamilyKey {
  std::string op;         // an op of the op table: "ln_modulate_fwd", "mxfp6_pack_dual", ...
  std::string variant;    // canonical "K=V,K=V" (sorted by K; "" for none): FMT, MODE, layout, ...
  std::string target;     // "sm_90", "gfx942", "gfx950"
  std::string sizes;      // the specialized sizes, canonical "C=9216" / "D=3072" ("" for none)
  std::string toolchain;  // the toolchain fingerprint (autotune/toolchain.h)

  auto operator<=>(const FamilyKey&) const = default;
};

/// One tuning key: a family at one row count.
struct Key {
  FamilyKey family;
  int64_t rows = 0;  // M: tokens or (token, head) rows, as the op defines it

  auto operator<=>(const Key&) const = default;
};

/// "op/variant/target/sizes/M=rows" for messages and the command line; the toolchain is left
/// out (it is long and the same for a whole database in practice).
std::string formatKey(const Key& key);

}  // namespace mxfp6::autotune
