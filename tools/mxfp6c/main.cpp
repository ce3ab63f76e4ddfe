// mxfp6c: check, list and compile DSL kernels; precompile a whole kernel folder.
//
//   mxfp6c check FILE
//   mxfp6c list FILE
//   mxfp6c compile FILE --kernel NAME --target sm_90|gfx942|gfx950 [--config K=V,...]
//                  [--emit ast|kir|mlir|llvm|ptx|cubin|hsaco|isa] [-o OUT]
//   mxfp6c precompile PATH... -o DIR [--targets T1,T2,...]
//   mxfp6c precompile --shapes FILE --db DB [--targets T1,T2,...] [--jobs N] [--force]
//   mxfp6c precompile --shapes FILE -o DIR [--targets T1,T2,...] [--jobs N]
//   mxfp6c pin KEY --db DB (--plan ID | --config K=V,...) --why TEXT [--who NAME] [--expires ISO]
//   mxfp6c unpin KEY --db DB
//   mxfp6c run FILE --kernel NAME --in X=x.npy,... --out DIR [--config K=V,...]
//              [--target T (--device N | --compare)]
//   mxfp6c knobs
//   mxfp6c fetch (--server HOST:PORT[,...] | --db DB) --shapes FILE [--target T] [--cache DIR]
//
// Exit status: 0 on success, 1 on a user error (located diagnostics on stderr), 2 on bad usage.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/occupancy.h"
#include "compiler/frontend/frontend.h"
#include "compiler/frontend/knobs.h"
#include "compiler/precompile/precompile.h"
#include "tools/mxfp6c/fetch.h"
#include "tools/mxfp6c/pin.h"
#include "tools/mxfp6c/precompile_shapes.h"
#include "tools/mxfp6c/resource_report.h"
#include "tools/mxfp6c/run.h"

namespace {

using namespace mxfp6;
namespace fs = std::filesystem;

constexpr int kOk = 0, kUserError = 1, kUsage = 2;

const char* kUsageText =
    "usage:\n"
    "  mxfp6c check FILE\n"
    "  mxfp6c list FILE\n"
    "  mxfp6c compile FILE --kernel NAME --target sm_90|gfx942|gfx950 [--config K=V,...]\n"
    "                 [--emit ast|kir|mlir|llvm|ptx|cubin|hsaco|isa] [-o OUT]\n"
    "  mxfp6c precompile PATH... -o DIR [--targets sm_90,gfx942,gfx950]\n"
    "  mxfp6c precompile --shapes FILE --db DB [--targets sm_90,gfx942,gfx950] [--jobs N] [--force]\n"
    "  mxfp6c precompile --shapes FILE -o DIR [--targets sm_90,gfx942,gfx950] [--jobs N]\n"
    "  mxfp6c pin KEY --db DB (--plan ID | --config K=V,...) --why TEXT [--who NAME] [--expires ISO]\n"
    "                 [--toolchain FP]\n"
    "  mxfp6c unpin KEY --db DB [--toolchain FP]\n"
    "  mxfp6c fetch (--server HOST:PORT[,...] | --db DB) --shapes FILE [--target T] [--cache DIR]\n"
    "               [--fresh-for SECONDS] [--deadline-ms N]\n"
    "  mxfp6c run FILE --kernel NAME --in X=x.npy,... --out DIR [--config K=V,...]\n"
    "             [--target sm_90|gfx942|gfx950 (--device N | --compare)]\n"
    "  mxfp6c knobs\n";

std::string join(const std::vector<std::string>& xs, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? sep : "") + xs[i];
  return out;
}

/// Flags after the subcommand: positional arguments and `--name value` / `-o value` pairs.
struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
};

std::optional<Args> parseArgs(int argc, char** argv, const std::vector<std::string>& known) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("-", 0) == 0 && s != "-") {
      std::string name = s, value;
      if (auto eq = s.find('='); eq != std::string::npos) {
        name = s.substr(0, eq);
        value = s.substr(eq + 1);
      } else if (s == "--force" || s == "--quiet" || s == "--compare") {  // flags without a value
        value = "1";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        std::cerr << "mxfp6c: error: " << s << " needs a value\n";
        return std::nullopt;
      }
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::cerr << "mxfp6c: error: unknown option " << name << " (valid: " << join(known) << ")\n";
        return std::nullopt;
      }
      a.flags[name] = value;
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

std::optional<frontend::Module> load(const std::string& path, frontend::DiagnosticEngine& diags) {
  std::optional<frontend::Module> m = frontend::parseFile(path, diags);
  if (!m || diags.hasErrors()) {
    std::cerr << diags.render();
    return std::nullopt;
  }
  return m;
}

bool writeFile(const std::string& path, const std::string& bytes) {
  if (path == "-") {
    std::cout << bytes;
    return bool(std::cout);
  }
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) std::cerr << "mxfp6c: error: cannot write " << path << "\n";
  return bool(out);
}

std::string describeParam(const kir::Param& p) {
  std::string s = p.name + ": ";
  if (p.kind == kir::ParamKind::Scalar) {
    s += kir::dtypeName(p.dtype);
    if (p.hasDefault) {
      std::ostringstream v;
      v << p.defaultValue;
      s += " = " + v.str();
    }
    return s;
  }
  std::vector<std::string> dims;
  for (const kir::Dim& d : p.dims) dims.push_back(d.name);
  return s + (p.isOutput ? "out " : "") + kir::dtypeName(p.dtype) + "[" + join(dims) + "]";
}

int cmdCheck(const Args& a) {
  if (a.positional.size() != 1) return std::cerr << kUsageText, kUsage;
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = load(a.positional[0], diags);
  if (!m) return kUserError;
  // Instantiate every kernel at its default configuration, so constraint and shape errors
  // that only appear with concrete sizes are reported too.
  for (const frontend::KernelInfo& k : m->kernels())
    frontend::instantiate(*m, k.name, {}, diags);
  if (diags.hasErrors()) return std::cerr << diags.render(), kUserError;
  std::cout << a.positional[0] << ": " << m->kernels().size() << " kernel(s) ok\n";
  return kOk;
}

int cmdList(const Args& a) {
  if (a.positional.size() != 1) return std::cerr << kUsageText, kUsage;
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = load(a.positional[0], diags);
  if (!m) return kUserError;
  for (const frontend::KernelInfo& k : m->kernels()) {
    std::cout << "kernel " << k.name << "\n  params:\n";
    for (const kir::Param& p : k.params) std::cout << "    " << describeParam(p) << "\n";
    for (const frontend::SpecializeInfo& s : k.specializations)
      std::cout << "  specialize " << s.name << (s.defaultValue ? " = " + std::to_string(*s.defaultValue) : "")
                << "\n";
    for (const frontend::TunableInfo& t : k.tunables) {
      std::vector<std::string> vs;
      for (int64_t v : t.values) vs.push_back(std::to_string(v));
      std::cout << "  tune " << t.name << " in {" << join(vs) << "} default " << t.defaultValue << "\n";
    }
    for (const frontend::VariantInfo& v : k.variants)
      std::cout << "  variant " << v.name << " in {" << join(v.values) << "} default " << v.defaultValue
                << "\n";
    for (const frontend::ConstraintInfo& c : k.constraints)
      std::cout << "  require " << c.text << (c.message.empty() ? "" : "  # " + c.message) << "\n";
  }
  return kOk;
}

std::optional<codegen::TargetInfo> targetOrError(const std::string& name) {
  std::optional<codegen::TargetInfo> t = codegen::findTarget(name);
  if (!t) std::cerr << "mxfp6c: error: unknown target '" << name << "' (valid: " << join(codegen::targetNames()) << ")\n";
  return t;
}

int cmdCompile(const Args& a) {
  if (a.positional.size() != 1 || !a.flags.count("--kernel") || !a.flags.count("--target"))
    return std::cerr << kUsageText, kUsage;
  frontend::DiagnosticEngine diags;
  std::optional<frontend::Module> m = load(a.positional[0], diags);
  if (!m) return kUserError;

  const std::string& kernelName = a.flags.at("--kernel");
  if (!m->findKernel(kernelName)) {
    std::vector<std::string> names;
    for (const frontend::KernelInfo& k : m->kernels()) names.push_back(k.name);
    std::cerr << "mxfp6c: error: no kernel '" << kernelName << "' in " << a.positional[0]
              << " (kernels: " << join(names) << ")\n";
    return kUserError;
  }
  std::optional<codegen::TargetInfo> target = targetOrError(a.flags.at("--target"));
  if (!target) return kUserError;
  std::string emitText = a.flags.count("--emit") ? a.flags.at("--emit")
                         : target->backend == codegen::Backend::NVVM ? "cubin" : "hsaco";
  bool frontendStage = emitText == "ast" || emitText == "kir";
  std::optional<codegen::Emit> emit = codegen::parseEmit(emitText);
  if (!frontendStage && !emit) {
    std::cerr << "mxfp6c: error: unknown --emit '" << emitText
              << "' (valid: ast, kir, mlir, llvm, ptx, cubin, hsaco, isa)\n";
    return kUserError;
  }
  std::map<std::string, int64_t> config;
  if (a.flags.count("--config")) {
    std::string error;
    auto parsed = frontend::parseKernelConfig(*m, kernelName, a.flags.at("--config"), diags, error);
    if (!parsed && error.empty()) return std::cerr << diags.render(), kUserError;
    if (!parsed) return std::cerr << "mxfp6c: error: --config: " << error << "\n", kUserError;
    config = *parsed;
  }
  std::string out = a.flags.count("-o") ? a.flags.at("-o") : "-";

  if (emitText == "ast") return writeFile(out, frontend::dumpAst(*m)) ? kOk : kUserError;
  std::optional<kir::Kernel> kernel = frontend::instantiate(*m, kernelName, config, diags);
  if (!kernel) return std::cerr << diags.render(), kUserError;
  if (emitText == "kir") return writeFile(out, frontend::dumpKir(*kernel)) ? kOk : kUserError;

  Expected<codegen::CompiledKernel> compiled = codegen::compileKernel(*kernel, *target, *emit);
  if (!compiled)
    return std::cerr << "mxfp6c: error: " << diags.annotate(compiled.status().message()) << "\n", kUserError;
  if (!writeFile(out, compiled->bytes)) return kUserError;
  if (!a.flags.count("--quiet")) std::cerr << cli::resourceReport(kernelName, *target, *compiled);
  bool codeObject = *emit == codegen::Emit::Cubin || *emit == codegen::Emit::Hsaco || *emit == codegen::Emit::Ptx;
  if (codeObject && out != "-") {
    // Stamped like the database's objects, so the client (and the benchmark through it) loads them.
    Expected<std::string> meta = precompile::stampedMetadata(compiled->metadataJson, precompile::toolchainFingerprint(), 2);
    if (!meta) return std::cerr << "mxfp6c: error: " << meta.status().message() << "\n", kUserError;
    if (!writeFile(out + ".json", *meta)) return kUserError;
  }
  return kOk;
}

/// Every `.mxk` file named, or found (sorted) in a named folder.
std::vector<std::string> collectSources(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> inDir;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.path().extension() == ".mxk") inDir.push_back(e.path().string());
      std::sort(inDir.begin(), inDir.end());
      files.insert(files.end(), inDir.begin(), inDir.end());
    } else {
      files.push_back(p);
    }
  }
  return files;
}

std::string orDash(const std::optional<int>& v) { return v ? std::to_string(*v) : "-"; }

int cmdPrecompile(const Args& a) {
  if (a.positional.empty() || !a.flags.count("-o")) return std::cerr << kUsageText, kUsage;
  std::vector<codegen::TargetInfo> targets;
  std::string targetList = a.flags.count("--targets") ? a.flags.at("--targets") : join(codegen::targetNames(), ",");
  std::stringstream ts(targetList);
  for (std::string name; std::getline(ts, name, ',');) {
    std::optional<codegen::TargetInfo> t = targetOrError(name);
    if (!t) return kUserError;
    targets.push_back(*t);
  }
  fs::path outDir = a.flags.at("-o");
  std::error_code ec;
  fs::create_directories(outDir, ec);
  if (ec) return std::cerr << "mxfp6c: error: cannot create " << outDir << ": " << ec.message() << "\n", kUserError;

  int failures = 0;
  const std::string toolchain = precompile::toolchainFingerprint();
  std::printf("%-28s %-7s %-6s %9s %6s %6s %8s %6s  %s\n", "kernel", "target", "format", "bytes", "regs", "sgprs",
              "shared", "stack", "occupancy (bound)");
  for (const std::string& file : collectSources(a.positional)) {
    frontend::DiagnosticEngine diags;
    std::optional<frontend::Module> m = load(file, diags);
    if (!m) { ++failures; continue; }
    for (const frontend::KernelInfo& info : m->kernels()) {
      std::optional<kir::Kernel> kernel = frontend::instantiate(*m, info.name, {}, diags);
      if (!kernel) { std::cerr << diags.render(); diags.clear(); ++failures; continue; }
      for (const codegen::TargetInfo& target : targets) {
        // sm_90 gets a cubin when ptxas is installed, PTX otherwise (the driver JITs it).
        codegen::Emit emit = target.backend == codegen::Backend::ROCDL ? codegen::Emit::Hsaco : codegen::Emit::Cubin;
        Expected<codegen::CompiledKernel> compiled = codegen::compileKernel(*kernel, target, emit);
        if (!compiled && emit == codegen::Emit::Cubin && compiled.status().message().find("ptxas not found") == 0) {
          std::cerr << "mxfp6c: note: " << info.name << " for " << target.name << ": ptxas not found, emitting PTX\n";
          emit = codegen::Emit::Ptx;
          compiled = codegen::compileKernel(*kernel, target, emit);
        }
        if (!compiled) {
          std::cerr << "mxfp6c: error: " << info.name << " for " << target.name << ": " << compiled.status().message()
                    << "\n";
          ++failures;
          continue;
        }
        fs::path base = outDir / (info.name + "." + target.name + "." + codegen::emitName(emit));
        Expected<std::string> meta = precompile::stampedMetadata(compiled->metadataJson, toolchain, 2);
        if (!meta) {
          std::cerr << "mxfp6c: error: " << info.name << " for " << target.name << ": " << meta.status().message() << "\n";
          ++failures;
          continue;
        }
        if (!writeFile(base.string(), compiled->bytes) || !writeFile(base.string() + ".json", *meta)) {
          ++failures;
          continue;
        }
        const codegen::Resources& r = compiled->resources;
        std::optional<codegen::Occupancy> occ = codegen::estimateOccupancy(target, r, compiled->blockThreads);
        std::string occupancy = occ ? std::to_string(int(occ->fraction * 100 + 0.5)) + "% (" + occ->limit + ")" : "-";
        std::printf("%-28s %-7s %-6s %9zu %6s %6s %8s %6s  %s\n", info.name.c_str(), target.name.c_str(),
                    codegen::emitName(emit), compiled->bytes.size(), orDash(r.registers).c_str(),
                    orDash(r.sgprs).c_str(), orDash(r.sharedBytes).c_str(), orDash(r.stackBytes).c_str(),
                    occupancy.c_str());
      }
    }
  }
  std::fflush(stdout);
  return failures ? kUserError : kOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::cerr << kUsageText, kUsage;
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help") return std::cout << kUsageText, kOk;
  std::optional<Args> args;
  if (cmd == "check" || cmd == "list" || cmd == "knobs") args = parseArgs(argc, argv, {});
  else if (cmd == "compile") args = parseArgs(argc, argv, {"--kernel", "--target", "--config", "--emit", "-o", "--quiet"});
  else if (cmd == "run")
    args = parseArgs(argc, argv, {"--kernel", "--config", "--in", "--out", "--target", "--device", "--compare"});
  else if (cmd == "precompile") args = parseArgs(argc, argv, {"-o", "--targets", "--shapes", "--db", "--jobs", "--force", "--dsl-dir"});
  else if (cmd == "pin" || cmd == "unpin")
    args = parseArgs(argc, argv, {"--db", "--plan", "--config", "--why", "--who", "--expires", "--toolchain"});
  else if (cmd == "fetch")
    args = parseArgs(argc, argv, {"--server", "--db", "--shapes", "--target", "--cache", "--fresh-for", "--deadline-ms"});
  else return std::cerr << "mxfp6c: error: unknown command '" << cmd << "' (valid: check, list, compile, precompile, pin, unpin, fetch, run, knobs)\n" << kUsageText, kUsage;
  if (!args) return kUsage;
  if (cmd == "check") return cmdCheck(*args);
  if (cmd == "list") return cmdList(*args);
  if (cmd == "compile") return cmdCompile(*args);
  if (cmd == "knobs") return std::cout << frontend::knobTableText(), kOk;
  if (cmd == "run") {
    int rc = cli::runCommand(args->positional, args->flags);
    if (rc == kUsage) std::cerr << kUsageText;
    return rc;
  }
  if (cmd == "pin" || cmd == "unpin") return cli::pinCommand(cmd, args->positional, args->flags);
  if (cmd == "fetch") return args->positional.empty() ? cli::fetchCommand(args->flags) : (std::cerr << kUsageText, kUsage);
  // With --shapes: the shape set's candidates into a database (--db) or a folder (-o).
  if (args->flags.count("--shapes") || args->flags.count("--db")) {
    bool toDb = args->flags.count("--db") > 0, toFolder = args->flags.count("-o") > 0;
    if (!args->flags.count("--shapes") || toDb == toFolder || !args->positional.empty() ||
        (toFolder && args->flags.count("--force")))
      return std::cerr << kUsageText, kUsage;
    return toDb ? cli::precompileIntoDb(args->flags) : cli::precompileIntoFolder(args->flags);
  }
  return cmdPrecompile(*args);
}
