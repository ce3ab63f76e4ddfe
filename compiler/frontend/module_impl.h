// What a Module holds: the file's checked AST and the kernels' descriptions.
#pragma once

#include <string>
#include <vector>

#include "compiler/frontend/ast.h"
#include "compiler/frontend/frontend.h"

namespace mxfp6::frontend {

struct ModuleImpl {
  std::string file;
  ast::File ast;
  std::vector<KernelInfo> kernels;  // parallel to ast.kernels

  const ast::KernelDecl* findKernel(const std::string& name) const {
    for (const ast::KernelDecl& k : ast.kernels)
      if (k.name == name) return &k;
    return nullptr;
  }
};

}  // namespace mxfp6::frontend
