// Reading and writing NumPy .npy files (format versions 1 and 2, little-endian, C order), for
// `mxfp6c run` and mxfp6-run. bf16 has no NumPy dtype: a bf16 tensor is a uint16 array ('<u2')
// of its bits (ml_dtypes' bfloat16 arrays: `a.view(np.uint16)` before saving,
// `.view(ml_dtypes.bfloat16)` after loading); an ml_dtypes file saved as 2-byte void ('<V2') is
// read as bf16 bits too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/frontend/kir.h"
#include "support/status.h"

namespace mxfp6::cli {

struct NpyArray {
  kir::Dtype dtype = kir::Dtype::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // element data, C order
};

/// Reads `path` as a tensor of `expected` (the kernel parameter's dtype): the file's dtype must
/// be the one that stores it (bf16: '<u2' or '<V2'; f16 '<f2'; f32 '<f4'; i32 '<i4'; u8 '|u1').
Expected<NpyArray> readNpy(const std::string& path, kir::Dtype expected);
Status writeNpy(const std::string& path, const NpyArray& array);

}  // namespace mxfp6::cli
