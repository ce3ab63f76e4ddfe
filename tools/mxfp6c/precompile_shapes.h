// `mxfp6c precompile --shapes FILE --targets T,... (--db DB | -o DIR)`: every candidate of every
// plan a shape set needs, compiled into the kernel database or into a folder of code objects
// (docs/architecture.md, "Precompile").
#pragma once

#include <map>
#include <string>

namespace mxfp6::cli {

/// Flags: --shapes, --db, --targets (default all), --jobs (default: every core), --force
/// (recompile families already present). Returns the process exit code.
int precompileIntoDb(const std::map<std::string, std::string>& flags);

/// Flags: --shapes, -o (the folder), --targets (default all), --jobs. Each code object the
/// candidates launch goes to `<DIR>/<kernel>.<target>.<tag>.code` with its launch metadata in
/// `<file>.json`, the tag being the config with "," -> "_" and "=" dropped: the names and
/// metadata of cmake/Mxfp6Kernels.cmake's mxfp6_code_objects(). A file whose bytes are already
/// those is left alone, so a build that reruns this keeps its timestamps. Returns the exit code.
int precompileIntoFolder(const std::map<std::string, std::string>& flags);

}  // namespace mxfp6::cli
