// Keys as the command line spells them: "op/variant/target/sizes/M" (formatKey's form), with
// the toolchain taken from the database when only one toolchain has that family.
#pragma once

#include <optional>
#include <string>

#include "autotune/db.h"

namespace mxfp6::autotune {

struct KeyTextError {
  bool usage = false;  // a malformed key or an ambiguous toolchain (exit 2), not a missing entry
};

/// Parses `text`; `toolchain` when given, else the one toolchain the database holds the family
/// under (an error listing them when there are several, or naming the family when none).
Expected<Key> parseKeyText(KernelDb& db, const std::string& text, const std::optional<std::string>& toolchain,
                           KeyTextError& error);

/// The candidate of a family that a pin names: `planId` exactly, or else the one candidate whose
/// launches have every K=V of `config` ("THREADS=384,P=8": a launch's tunable, or P of the
/// plan). Errors list the matches when several fit, or say none does.
Expected<Candidate> findCandidate(KernelDb& db, const FamilyKey& family, const std::string& planId,
                                  const std::string& config);

}  // namespace mxfp6::autotune
