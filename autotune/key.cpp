#include "autotune/key.h"

namespace mxfp6::autotune {

std::string formatKey(const Key& key) {
  const FamilyKey& f = key.family;
  return f.op + "/" + f.variant + "/" + f.target + "/" + f.sizes + "/" + std::to_string(key.rows);
}

}  // namespace mxfp6::autotune
