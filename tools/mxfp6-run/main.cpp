// mxfp6-run: `mxfp6c run --device/--compare` for a GPU node without LLVM. The kernel's source
// still gives the interpreter and the argument binding; the code object is one compiled
// elsewhere (`mxfp6c compile FILE --kernel NAME --target sm_90 -o X.cubin`, which writes the
// metadata to X.cubin.json).
//
//   mxfp6-run FILE --kernel NAME --object X.cubin [--metadata X.cubin.json] [--config K=V,...]
//             --in X=x.npy,... (--out DIR | --compare) [--device N]
//
// Exit status: 0 on success, 1 on a user error (no GPU driver or device included), 2 on bad usage.

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "tools/kernel_run/kernel_run.h"

namespace {

using namespace mxfp6;

constexpr int kUserError = 1, kUsage = 2;

const char* kUsageText =
    "usage: mxfp6-run FILE --kernel NAME --object X.cubin [--metadata X.cubin.json] [--config K=V,...]\n"
    "                 --in X=x.npy,... (--out DIR | --compare) [--device N]\n"
    "Runs the precompiled code object on GPU N (default 0) and writes each output to DIR/NAME.npy;\n"
    "--compare also runs the fp64 interpreter and prints, per output, bit-exactness and the max\n"
    "error in ulps. The metadata defaults to the object's path + .json, as mxfp6c compile writes it.\n";

int usage(const std::string& message) {
  std::cerr << "mxfp6-run: error: " << message << "\n" << kUsageText;
  return kUsage;
}

Expected<std::string> readFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read " + std::string(what) + " " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

int main(int argc, char** argv) {
  const std::set<std::string> valued = {"--kernel", "--object", "--metadata", "--config", "--in", "--out", "--device"};
  std::map<std::string, std::string> flags;
  std::string file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return std::cout << kUsageText, 0;
    if (a == "--compare") {
      flags[a] = "1";
    } else if (valued.count(a)) {
      if (i + 1 == argc) return usage(a + " needs a value");
      flags[a] = argv[++i];
    } else if (a.rfind("-", 0) == 0) {
      return usage("unknown option " + a);
    } else if (file.empty()) {
      file = a;
    } else {
      return usage("one kernel file, got '" + file + "' and '" + a + "'");
    }
  }
  if (file.empty()) return usage("no kernel file");
  for (const char* required : {"--kernel", "--object", "--in"})
    if (!flags.count(required)) return usage(std::string(required) + " is required");
  if (!flags.count("--out") && !flags.count("--compare")) return usage("--out DIR or --compare is required");

  auto flag = [&](const char* name) { return flags.count(name) ? flags.at(name) : std::string(); };
  std::string object = flags.at("--object");
  std::string metadata = flags.count("--metadata") ? flags.at("--metadata") : object + ".json";
  // Read up front: a missing file is reported before any interpreter or device time.
  Expected<std::string> bytes = readFile(object, "code object");
  if (!bytes) return std::cerr << "mxfp6-run: error: " << bytes.status().message() << "\n", kUserError;
  Expected<std::string> json = readFile(metadata, "kernel metadata");
  if (!json) return std::cerr << "mxfp6-run: error: " << json.status().message() << " (--metadata)\n", kUserError;

  cli::RunRequest request{"mxfp6-run", file, flag("--kernel"), flag("--config"), flag("--in"), flag("--out")};
  request.device = true;
  request.compare = flags.count("--compare");
  if (flags.count("--device")) {
    const std::string& text = flags.at("--device");
    char* end = nullptr;
    long ordinal = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || ordinal < 0) return usage("--device takes a GPU number, got '" + text + "'");
    request.ordinal = int(ordinal);
  }
  request.code = [&](const kir::Kernel&) -> Expected<cli::CodeObject> { return cli::CodeObject{*bytes, *json}; };
  return cli::runKernel(request);
}
