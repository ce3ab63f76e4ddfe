#include "compiler/codegen/toolchain.h"

#include <unistd.h>

#include <cstdlib>

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

namespace mxfp6::codegen {
namespace {

std::optional<std::string> firstExisting(std::initializer_list<std::string> candidates) {
  for (const std::string& c : candidates)
    if (!c.empty() && llvm::sys::fs::can_execute(c)) return c;
  return std::nullopt;
}

std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string onPath(const char* name) {
  auto found = llvm::sys::findProgramByName(name);
  return found ? *found : "";
}

}  // namespace

std::optional<std::string> findPtxas() {
  return firstExisting({envOr("MXFP6_PTXAS"), "/usr/local/cuda/bin/ptxas", onPath("ptxas")});
}

Expected<std::string> rocdlToolkitPath() {
  std::optional<std::string> lld = firstExisting(
      {envOr("MXFP6_LD_LLD"), "/usr/lib/llvm-22/bin/ld.lld", onPath("ld.lld-22"), onPath("ld.lld")});
  if (!lld)
    return Status::error("ld.lld not found (set MXFP6_LD_LLD, or install lld-22): AMD code objects are linked with it");
  llvm::SmallString<256> root;
  llvm::sys::path::system_temp_directory(/*erasedOnReboot=*/true, root);
  llvm::sys::path::append(root, "mxfp6c-rocdl-toolkit-" + std::to_string(getuid()));
  llvm::SmallString<256> bin(root);
  llvm::sys::path::append(bin, "llvm", "bin");
  if (std::error_code ec = llvm::sys::fs::create_directories(bin))
    return Status::error("cannot create " + std::string(bin) + ": " + ec.message());
  llvm::SmallString<256> link(bin);
  llvm::sys::path::append(link, "ld.lld");
  // Re-point the link every time: cheap, and another LLVM install may have replaced the old one.
  llvm::SmallString<256> tmp(link);
  tmp += "." + std::to_string(getpid());
  llvm::sys::fs::remove(tmp);
  if (std::error_code ec = llvm::sys::fs::create_link(*lld, tmp))
    return Status::error("cannot link " + *lld + " into " + std::string(bin) + ": " + ec.message());
  if (std::error_code ec = llvm::sys::fs::rename(tmp, link))
    return Status::error("cannot place " + std::string(link) + ": " + ec.message());
  return std::string(root);
}

Expected<int> runProgram(const std::string& program, const std::vector<std::string>& args, std::string& output) {
  llvm::SmallString<256> outPath;
  if (std::error_code ec = llvm::sys::fs::createTemporaryFile("mxfp6c-tool", "log", outPath))
    return Status::error("cannot create a temporary file: " + ec.message());
  std::vector<llvm::StringRef> argv = {program};
  for (const std::string& a : args) argv.push_back(a);
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(outPath), llvm::StringRef(outPath)};
  std::string errMsg;
  int rc = llvm::sys::ExecuteAndWait(program, argv, std::nullopt, redirects, 0, 0, &errMsg);
  auto buf = llvm::MemoryBuffer::getFile(outPath);
  output = buf ? (*buf)->getBuffer().str() : "";
  llvm::sys::fs::remove(outPath);
  if (rc < 0) return Status::error("cannot run " + program + ": " + errMsg);
  return rc;
}

}  // namespace mxfp6::codegen
