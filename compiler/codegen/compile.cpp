// The driver of the code generator: KIR -> MLIR (mlir_gen) -> target pipeline -> code object,
// stopping after whichever stage the caller asked for.
//
//   nvvm:  convert-scf-to-cf, convert-gpu-to-nvvm  -> gpu-module-to-binary{isa} = PTX -> ptxas -> cubin
//          (the dynamic shared memory's global made external between the two)
//   rocdl: convert-scf-to-cf, convert-gpu-to-rocdl -> gpu-module-to-binary{bin} = HSACO (linked by ld.lld)
//
// `scf` goes to `cf` inside the gpu.module before the GPU-to-NVVM/ROCDL conversion, which
// expects unstructured control flow.

#include <sstream>

#include "compiler/codegen/codegen.h"
#include "compiler/codegen/metadata.h"
#include "compiler/codegen/mlir_gen.h"
#include "compiler/codegen/registry.h"
#include "compiler/codegen/resources.h"
#include "compiler/codegen/toolchain.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

namespace mxfp6::codegen {
namespace {

/// Collects MLIR diagnostics as `file:line:col: error: message` lines.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext& ctx)
      : handler_(&ctx, [this](mlir::Diagnostic& d) {
          const char* sev = d.getSeverity() == mlir::DiagnosticSeverity::Error ? "error" : "note";
          std::string calls;
          text_ += position(d.getLocation(), calls) + sev + ": " + d.str() + "\n" + calls;
          return mlir::success();
        }) {}
  Status failure(const std::string& what) const {
    return Status::error(text_.empty() ? what : what + ":\n" + text_);
  }

 private:
  /// "file:line:col: " of `loc` (empty when it has none). A position in a fn's body (a call
  /// site, kernel_emitter.h's sourceLocation) appends to `calls` a note for each call that led
  /// there, innermost first.
  static std::string position(mlir::Location loc, std::string& calls) {
    if (auto site = llvm::dyn_cast<mlir::CallSiteLoc>(loc)) {
      std::string here = position(site.getCallee(), calls);
      mlir::Location caller = site.getCaller();
      std::string fn;
      if (auto named = llvm::dyn_cast<mlir::NameLoc>(caller)) {
        fn = named.getName().str();
        caller = named.getChildLoc();
      }
      std::string outer;
      calls += position(caller, outer) + "note: in the call of fn '" + fn + "'\n" + outer;
      return here;
    }
    if (auto flc = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
      return flc.getFilename().str() + ":" + std::to_string(flc.getLine()) + ":" +
             std::to_string(flc.getColumn()) + ": ";
    return "";
  }

  std::string text_;
  mlir::ScopedDiagnosticHandler handler_;
};

/// The pass pipelines on the top-level module (the PassManager is anchored there already): the
/// conversion to the target's LLVM dialect, then the serialization.
std::string conversionPipelineFor(const TargetInfo& target) {
  std::ostringstream p;
  if (target.backend == Backend::NVVM) {
    p << "nvvm-attach-target{chip=" << target.chip << " O=3},"
      << "gpu.module(convert-scf-to-cf,convert-gpu-to-nvvm,canonicalize,cse,reconcile-unrealized-casts)";
  } else {
    p << "rocdl-attach-target{chip=" << target.chip << " O=3},"
      << "gpu.module(convert-scf-to-cf,convert-gpu-to-rocdl,canonicalize,cse,reconcile-unrealized-casts)";
  }
  return p.str();
}

std::string serializationPipelineFor(const TargetInfo& target, const std::string& format, const std::string& toolkit) {
  std::ostringstream p;
  p << "gpu-module-to-binary{format=" << format;
  if (target.backend == Backend::ROCDL) p << " toolkit=" << toolkit;
  p << "}";
  return p.str();
}

/// gpu.dynamic_shared_memory lowers to an internal zero-length global, which PTX declares as one
/// byte of static shared memory that the launch's dynamic bytes merely follow. Declared external,
/// it is the base of the dynamic shared memory itself (`.extern .shared .b8 name[]`).
void externDynamicSharedMemory(mlir::ModuleOp module) {
  module.walk([](mlir::LLVM::GlobalOp global) {
    if (global.getSymName().starts_with("__dynamic_shmem__")) global.setLinkage(mlir::LLVM::Linkage::External);
  });
}

Status runPipeline(mlir::MLIRContext& ctx, mlir::ModuleOp module, const TargetInfo& target, const std::string& pipeline,
                   DiagnosticCollector& diags) {
  mlir::PassManager pm(&ctx);
  std::string parseErrors;
  llvm::raw_string_ostream errStream(parseErrors);
  if (mlir::failed(mlir::parsePassPipeline(pipeline, pm, errStream)))
    return Status::error("internal error: bad pass pipeline '" + pipeline + "': " + parseErrors);
  if (mlir::failed(pm.run(module))) return diags.failure("lowering to " + target.name + " failed");
  return Status::ok();
}

/// Runs the target pipeline and returns the serialized object of the single gpu.binary.
Expected<std::string> lowerToObject(mlir::MLIRContext& ctx, mlir::ModuleOp module, const TargetInfo& target,
                                    const std::string& format, DiagnosticCollector& diags) {
  std::string toolkit;
  if (target.backend == Backend::ROCDL) {
    ASSIGN_OR_RETURN(toolkit, rocdlToolkitPath());
  }
  RETURN_IF_ERROR(runPipeline(ctx, module, target, conversionPipelineFor(target), diags));
  externDynamicSharedMemory(module);
  RETURN_IF_ERROR(runPipeline(ctx, module, target, serializationPipelineFor(target, format, toolkit), diags));
  std::string object;
  module.walk([&](mlir::gpu::BinaryOp binary) {
    for (mlir::Attribute a : binary.getObjects())
      if (auto obj = llvm::dyn_cast<mlir::gpu::ObjectAttr>(a)) object = obj.getObject().getValue().str();
  });
  if (object.empty()) return Status::error("lowering to " + target.name + " produced no object");
  return object;
}

Expected<std::string> bitcodeToText(const std::string& bitcode) {
  llvm::LLVMContext llvmCtx;
  auto buffer = llvm::MemoryBuffer::getMemBuffer(bitcode, "kernel.bc", false);
  auto parsed = llvm::parseBitcodeFile(buffer->getMemBufferRef(), llvmCtx);
  if (!parsed) return Status::error("cannot read the generated LLVM bitcode: " + llvm::toString(parsed.takeError()));
  std::string text;
  llvm::raw_string_ostream os(text);
  (*parsed)->print(os, nullptr);
  return text;
}

/// Assembles PTX with ptxas (-v reports registers and shared memory).
Expected<std::string> assemblePtx(const std::string& ptx, const TargetInfo& target, Resources& resources) {
  std::optional<std::string> ptxas = findPtxas();
  if (!ptxas)
    return Status::error("ptxas not found (looked at $MXFP6_PTXAS, /usr/local/cuda/bin/ptxas and PATH): "
                         "--emit cubin needs it; --emit ptx does not");
  llvm::SmallString<128> ptxPath, cubinPath;
  llvm::sys::fs::createTemporaryFile("mxfp6c", "ptx", ptxPath);
  llvm::sys::fs::createTemporaryFile("mxfp6c", "cubin", cubinPath);
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(ptxPath, ec);
    if (ec) return Status::error("cannot write " + std::string(ptxPath) + ": " + ec.message());
    os << ptx;
  }
  std::string output;
  Expected<int> rc = runProgram(*ptxas, {"-arch=" + target.chip, "-O3", "-v", std::string(ptxPath), "-o",
                                         std::string(cubinPath)}, output);
  llvm::sys::fs::remove(ptxPath);
  auto cubin = llvm::MemoryBuffer::getFile(cubinPath);
  llvm::sys::fs::remove(cubinPath);
  if (!rc.isOk()) return rc.status();
  if (*rc != 0) return Status::error("ptxas failed (exit " + std::to_string(*rc) + "):\n" + output);
  if (!cubin) return Status::error("ptxas wrote no cubin");
  resources = parsePtxasResources(output);
  return (*cubin)->getBuffer().str();
}

}  // namespace

std::optional<Emit> parseEmit(const std::string& name) {
  for (Emit e : {Emit::Mlir, Emit::Llvm, Emit::Ptx, Emit::Cubin, Emit::Hsaco, Emit::Isa})
    if (name == emitName(e)) return e;
  return std::nullopt;
}

const char* emitName(Emit e) {
  switch (e) {
    case Emit::Mlir: return "mlir";
    case Emit::Llvm: return "llvm";
    case Emit::Ptx: return "ptx";
    case Emit::Cubin: return "cubin";
    case Emit::Hsaco: return "hsaco";
    case Emit::Isa: return "isa";
  }
  return "?";
}

bool emitSupported(Emit e, const TargetInfo& target) {
  switch (e) {
    case Emit::Ptx: case Emit::Cubin: return target.backend == Backend::NVVM;
    case Emit::Hsaco: case Emit::Isa: return target.backend == Backend::ROCDL;
    default: return true;
  }
}

Expected<CompiledKernel> compileKernel(const kir::Kernel& kernel, const TargetInfo& target, Emit emit) {
  if (!emitSupported(emit, target))
    return Status::error(std::string("--emit ") + emitName(emit) + " is not produced for " + target.name +
                         (target.backend == Backend::NVVM ? " (choose mlir, llvm, ptx or cubin)"
                                                          : " (choose mlir, llvm, hsaco or isa)"));
  mlir::DialectRegistry registry;
  registerCompilerComponents(registry);
  mlir::MLIRContext ctx(registry);
  DiagnosticCollector diags(ctx);

  LaunchShape shape;
  mlir::OwningOpRef<mlir::ModuleOp> module = generateMLIR(ctx, kernel, target, shape);
  if (!module) return diags.failure("cannot generate code for kernel '" + kernel.name + "'");

  CompiledKernel out;
  if (emit == Emit::Mlir) {
    llvm::raw_string_ostream os(out.bytes);
    module->print(os);
  } else if (emit == Emit::Llvm) {
    ASSIGN_OR_RETURN(std::string bitcode, lowerToObject(ctx, *module, target, "llvm", diags));
    ASSIGN_OR_RETURN(out.bytes, bitcodeToText(bitcode));
  } else if (emit == Emit::Ptx || emit == Emit::Isa) {
    ASSIGN_OR_RETURN(out.bytes, lowerToObject(ctx, *module, target, "isa", diags));
  } else if (emit == Emit::Cubin) {
    ASSIGN_OR_RETURN(std::string ptx, lowerToObject(ctx, *module, target, "isa", diags));
    ASSIGN_OR_RETURN(out.bytes, assemblePtx(ptx, target, out.resources));
  } else {
    ASSIGN_OR_RETURN(out.bytes, lowerToObject(ctx, *module, target, "bin", diags));
    ASSIGN_OR_RETURN(out.resources, readHsacoResources(out.bytes, entryName(kernel)));
  }
  // ptxas counts static shared memory only; residency depends on all of a program's.
  if (out.resources.registers && shape.dynamicSharedBytes > 0)
    out.resources.sharedBytes = out.resources.sharedBytes.value_or(0) + shape.dynamicSharedBytes;
  out.metadataJson = launchMetadataJson(kernel, target, shape, out.resources);
  out.blockThreads = shape.blockThreads;
  return out;
}

}  // namespace mxfp6::codegen
