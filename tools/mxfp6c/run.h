// `mxfp6c run`: one kernel on .npy inputs, through the fp64 reference interpreter, or through the
// compiled code object on a GPU (--target T --device N), or both compared (--compare).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace mxfp6::cli {

/// Exit status as mxfp6c's: 0 ok, 1 user error (located diagnostics on stderr), 2 bad usage.
int runCommand(const std::vector<std::string>& positional, const std::map<std::string, std::string>& flags);

}  // namespace mxfp6::cli
