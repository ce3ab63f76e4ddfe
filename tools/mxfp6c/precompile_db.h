// `mxfp6c precompile --shapes FILE --targets T,... --db DB`: every candidate of every plan a shape
// set needs, compiled into the kernel database (docs/architecture.md, "Precompile").
#pragma once

#include <map>
#include <string>

namespace mxfp6::cli {

/// Flags: --shapes, --db, --targets (default all), --jobs (default: every core), --force
/// (recompile families already present). Returns the process exit code.
int precompileIntoDb(const std::map<std::string, std::string>& flags);

}  // namespace mxfp6::cli
