// The schedule knobs: tunables whose names the code generator reads to choose how a kernel is
// laid out on the GPU (rows per program, vector width, prefetching, ...). This table is the one
// place that names them, with their meaning, legal values and the value a kernel that does not
// declare one gets. The frontend checks `tune` clauses against it (a knob's candidates must be
// legal; a tunable that is neither a knob nor used by the kernel is an error), `mxfp6c knobs`
// prints it, and the code generator reads knobs only through knobValue(). Plain C++.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "compiler/frontend/kir.h"

namespace mxfp6::frontend {

enum class Knob {
  Rows, Threads, Vec, Prefetch, Stage, Serial, Async, Predicate, Interleave, Anchor,
  Invariants, Scalars, Overlap, MinProgs,
};

struct KnobInfo {
  Knob knob;
  const char* name;     // as written in `tune` ("PREFETCH")
  int64_t absent;       // the value of a kernel that does not declare it
  int64_t min, max;     // legal candidates: min..max
  const char* meaning;  // one line; kernels_dsl/README.md has the long form
};

/// Every knob, in the order `mxfp6c knobs` prints them.
std::span<const KnobInfo> knobTable();
const KnobInfo& knobInfo(Knob knob);
/// The knob named `name`; nullptr for any other name.
const KnobInfo* findKnob(std::string_view name);
/// The knob name closest to `name` (at most two edits away), for "did you mean"; nullptr if none.
const KnobInfo* nearestKnob(std::string_view name);
/// "0, 1 or 2" / "at least 1": the legal values, for messages and the table.
std::string legalValuesText(const KnobInfo& info);

/// The knob's value in `kernel`'s configuration, or the table's `absent` value.
int64_t knobValue(const kir::Kernel& kernel, Knob knob);
/// Where the knob's `tune` entry is, or the kernel's declaration when it has none: where an
/// error caused by the knob's value points.
const kir::SourceLoc& knobLoc(const kir::Kernel& kernel, Knob knob);

/// The table as text: one line per knob, name, default, legal values and meaning.
std::string knobTableText();

}  // namespace mxfp6::frontend
