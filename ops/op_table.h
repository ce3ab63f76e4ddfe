// The ops a training process calls, declared once (docs/architecture.md, "Ops and plans").
//
// An op is what a caller runs (LN-modulate forward, the dual packer, the whole-QKV norm+RoPE
// backward ...); a plan is one concrete way to run it: its launches in order, each a DSL kernel at
// one config, the scratch buffers between them and the sizes derived from the shape. The op table
// says, per op, which plan families exist (one kernel, or a pass writing partials followed by a
// fixed-order reduction, ...), the kernels of each family's launch roles and their candidate
// configs: the one source of candidates that precompile compiles, the tuner times, and
// resolution falls back to (the first candidate of the first family is the op's default plan).
//
// No LLVM, no SQLite: the runtime side (the client a training process loads) reads this table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "support/status.h"

namespace mxfp6::ops {

/// One launch role of a plan family: a DSL kernel and the configs (tunables, "K=V,...") that are
/// its candidates, the first being its default.
struct RoleSpec {
  std::string role;      // "pass", "reduce", "transpose"
  std::string kernel;    // the DSL kernel
  std::vector<std::string> configs;
  /// Whether the kernel takes the op's compile-time variants (FMT, MODE) and specialized size:
  /// false for the shared helpers (the dw reduction, the scales transpose), which have neither.
  bool specialized = true;
  /// The .mxk file holding the kernel, when not the op's own.
  std::string file;
};

/// How a family's partial sums are reduced, when it writes them.
enum class Partials {
  None,
  PerSample,  // LN-modulate backward: P partials per sample, P a tuned choice, one reduce launch
  Tree,       // norm+RoPE backward: P partials reduced by a tree of reduce launches (treeChunks)
};

struct FamilySpec {
  std::string name;               // "rows", "samples", "tiles" ...: the plan's first word
  std::vector<RoleSpec> roles;    // in launch order (a tree role runs once per tree level)
  Partials partials = Partials::None;
  std::vector<int64_t> partialChoices;  // PerSample: the candidate P values
  /// Tokens (op rows for per-tensor ops) must be a multiple of this for the family to apply
  /// (the tiled passes work on blocks of 32 tokens).
  int64_t tokenMultiple = 1;
};

/// A variant axis: a choice the caller makes (format, scale mode, token layout) that selects
/// different code or a different best plan, so it is part of the key.
struct VariantAxis {
  std::string name;                  // "FMT", "MODE", "layout"
  std::vector<std::string> values;   // the first is the default
  bool compileTime = true;           // passed to the kernels' configs (FMT, MODE) or not (layout)
  /// Compile-time axes: the integer the compiler binds each value to (values' order), which is
  /// how a code object's launch metadata reports the variant ("config": {"FMT": 1}).
  std::vector<int64_t> codes;
};

struct OpSpec {
  std::string name;                  // "ln_modulate_fwd", ...
  std::string file;                  // the .mxk file under kernels_dsl/ that holds its kernels
  std::string summary;
  std::vector<VariantAxis> variants;
  /// The specialized size of the key: "D" (LN-modulate, 3072 only), "C" (packers: the row
  /// width) or "" (norm+RoPE: head_dim 128 is fixed by the kernels).
  std::string sizeName;
  std::vector<int64_t> sizeValues;   // the sizes the kernels can be specialized to
  /// What M (the key's rows) counts: "tokens", or "rows" ((token, head) pairs).
  std::string rowsMeaning;
  std::vector<FamilySpec> families;
  /// Per-sample modulation: the call names tokens_per_sample (S), which the key carries and
  /// which bounds a plan's partials per sample.
  bool perSample = false;
  /// The op's tokens must be a multiple of this for any plan (column packing works on blocks of
  /// 32 rows, the prologue on tiles of 32 tokens).
  int64_t tokenMultiple = 1;
};

/// The .mxk file (under kernels_dsl/) that holds a kernel one of the op's plans launches; empty
/// for a kernel the op never launches.
std::string kernelFile(const OpSpec& op, std::string_view kernel);

/// The toolchain field of an op's keys: the compiler's fingerprint (of the objects' compiler)
/// followed by "; dsl " and a hash of the .mxk files the op's kernels come from, so editing a
/// kernel re-keys exactly the ops that launch it (and no other op re-tunes for nothing).
Expected<std::string> keyToolchain(const std::string& compiler, const OpSpec& op, const std::string& dslDir);
/// The compiler's part of a key's toolchain (what its code objects' metadata records).
std::string compilerOfToolchain(const std::string& keyToolchain);

/// Every op, in a fixed order.
std::span<const OpSpec> opTable();
const OpSpec* findOp(std::string_view name);

/// The run lengths of a fixed-order tree reduction of `partials` values: level i sums runs of
/// chunks[i] consecutive values of the previous level (ascending), the product of the chunks is
/// `partials`, each level but the last has a chunk <= fanIn. A count with no divisor in
/// [4, fanIn] leaves the rest to the last level.
std::vector<int64_t> treeChunks(int64_t partials, int64_t fanIn = 32);

/// The number of dw partials the per-row norm+RoPE backward writes: min(8192, rows).
inline constexpr int64_t kNormRopeRowPartials = 8192;

}  // namespace mxfp6::ops
