// External programs the code generator calls: ptxas (PTX -> cubin, optional) and ld.lld (the
// ROCDL serializer links HSACO with it, and looks for it inside a "toolkit" folder).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "support/status.h"

namespace mxfp6::codegen {

/// ptxas from $MXFP6_PTXAS, /usr/local/cuda/bin or PATH; nullopt when absent.
std::optional<std::string> findPtxas();

/// A folder laid out as the ROCDL serializer expects (`llvm/bin/ld.lld`), made once per user
/// under the temp directory, pointing at the ld.lld from $MXFP6_LD_LLD, LLVM 22 or PATH.
Expected<std::string> rocdlToolkitPath();

/// Runs `program args...` with its stdout+stderr captured into `output`; returns the exit code.
Expected<int> runProgram(const std::string& program, const std::vector<std::string>& args, std::string& output);

}  // namespace mxfp6::codegen
