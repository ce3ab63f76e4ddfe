#include "compiler/codegen/registry.h"

#include <mutex>

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

namespace mxfp6::codegen {

void registerCompilerComponents(mlir::DialectRegistry& registry) {
  static std::once_flag passesOnce;
  std::call_once(passesOnce, [] { mlir::registerAllPasses(); });
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllToLLVMIRTranslations(registry);
}

}  // namespace mxfp6::codegen
