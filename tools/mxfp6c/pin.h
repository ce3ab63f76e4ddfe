// `mxfp6c pin` / `mxfp6c unpin`: a pin overrides tuning for one key, records who, when and why,
// and survives re-tuning (docs/architecture.md, "Pins").
#pragma once

#include <map>
#include <string>
#include <vector>

namespace mxfp6::cli {

/// pin:   KEY --db DB (--plan ID | --config K=V,...) --why TEXT [--who NAME] [--expires ISO]
///        [--toolchain FP]
/// unpin: KEY --db DB [--toolchain FP]
/// Returns the exit code: 0 done, 1 not found / refused, 2 usage.
int pinCommand(const std::string& command, const std::vector<std::string>& positional,
               const std::map<std::string, std::string>& flags);

}  // namespace mxfp6::cli
