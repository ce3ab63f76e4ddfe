#include "tools/kernel_run/npy.h"

#include <fstream>
#include <iterator>

namespace mxfp6::cli {
namespace {

const char* descrFor(kir::Dtype t) {
  switch (t) {
    case kir::Dtype::BF16: return "<u2";
    case kir::Dtype::F16: return "<f2";
    case kir::Dtype::F32: return "<f4";
    case kir::Dtype::I32: return "<i4";
    case kir::Dtype::I64: return "<i8";
    case kir::Dtype::U8: return "|u1";
    default: return nullptr;
  }
}

/// The value of 'key' in the header's Python dict literal, as written ("'<f4'", "(2, 3)").
std::string field(const std::string& header, const std::string& key) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) return {};
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) return {};
  size_t begin = header.find_first_not_of(' ', colon + 1);
  if (begin == std::string::npos) return {};
  size_t end = header[begin] == '(' ? header.find(')', begin) + 1 : header.find_first_of(",}", begin);
  return header.substr(begin, end - begin);
}

}  // namespace

Expected<NpyArray> readNpy(const std::string& path, kir::Dtype expected) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read " + path);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (data.size() < 10 || data.compare(0, 6, "\x93NUMPY") != 0) return Status::error(path + " is not a .npy file");
  const int major = uint8_t(data[6]);
  size_t headerLen = 0, headerAt = 0;
  if (major == 1) {
    headerLen = uint8_t(data[8]) | uint8_t(data[9]) << 8;
    headerAt = 10;
  } else if ((major == 2 || major == 3) && data.size() >= 12) {
    for (int i = 0; i < 4; ++i) headerLen |= size_t(uint8_t(data[8 + i])) << (8 * i);
    headerAt = 12;
  } else {
    return Status::error(path + ": unsupported .npy version " + std::to_string(major));
  }
  if (data.size() < headerAt + headerLen) return Status::error(path + ": truncated header");
  std::string header = data.substr(headerAt, headerLen);
  std::string descr = field(header, "descr");
  if (field(header, "fortran_order") != "False")
    return Status::error(path + ": Fortran-order arrays are not supported (save a C-order copy)");
  std::string want = descrFor(expected);
  bool bf16Void = expected == kir::Dtype::BF16 && descr == "'<V2'";
  if (descr != "'" + want + "'" && !bf16Void)
    return Status::error(path + " holds " + descr + " elements; a " + kir::dtypeName(expected) +
                         " tensor takes '" + want + "'" +
                         (expected == kir::Dtype::BF16 ? " (bf16 bits as uint16: a.view(np.uint16))" : ""));
  NpyArray a;
  a.dtype = expected;
  std::string shape = field(header, "shape");
  int64_t count = 1;
  for (size_t i = 1; i + 1 < shape.size();) {
    size_t end = shape.find_first_of(",)", i);
    std::string digits = shape.substr(i, end - i);
    digits.erase(0, digits.find_first_not_of(' '));
    if (!digits.empty()) {
      a.shape.push_back(std::stoll(digits));
      count *= a.shape.back();
    }
    i = end + 1;
  }
  size_t bytes = size_t(count) * kir::dtypeBytes(expected);
  if (data.size() - headerAt - headerLen < bytes) return Status::error(path + ": truncated data");
  a.bytes.assign(data.begin() + headerAt + headerLen, data.begin() + headerAt + headerLen + bytes);
  return a;
}

Status writeNpy(const std::string& path, const NpyArray& array) {
  std::string shape = "(";
  for (int64_t d : array.shape) shape += std::to_string(d) + ", ";
  if (array.shape.size() > 1) shape.resize(shape.size() - 2);
  shape += ")";
  std::string header = std::string("{'descr': '") + descrFor(array.dtype) + "', 'fortran_order': False, 'shape': " +
                       shape + ", }";
  // The data starts at a multiple of 64 bytes; the header ends with a newline.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  out.put(char(header.size() & 0xff));
  out.put(char(header.size() >> 8));
  out << header;
  out.write(reinterpret_cast<const char*>(array.bytes.data()), std::streamsize(array.bytes.size()));
  if (!out) return Status::error("cannot write " + path);
  return Status::ok();
}

}  // namespace mxfp6::cli
