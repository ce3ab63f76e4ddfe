// Call signatures and the checked launches kept per signature (client/call_cache.h).
#include "client/call_cache.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>

namespace mxfp6::client {

namespace {

// Each overlap group and each scratch allocation gets its own region of 2^44 bytes (16 TiB) at
// region index << 44; a group's tensors sit 2^43 bytes into it, so offsets of either sign fit.
constexpr int kRegionBits = 44;
constexpr uintptr_t kGroupOffset = uintptr_t{1} << (kRegionBits - 1);
// The scratch allocator guarantees 256-byte alignment (mxfp6_client.h): a larger alignment would
// make the scratch's address part of the signature.
constexpr uint32_t kMaxAlignment = 256;

uintptr_t regionStart(size_t region) { return uintptr_t(region) << kRegionBits; }

/// [first, last) bytes a tensor's elements span (as the launch checks count them); empty when it
/// has none.
std::pair<__int128, __int128> span(const mxrt_tensor& t) {
  __int128 low = 0, high = 0;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.sizes[d] == 0) return {0, 0};
    __int128 reach = static_cast<__int128>(t.sizes[d] - 1) * t.strides[d];
    (reach < 0 ? low : high) += reach;
  }
  __int128 base = reinterpret_cast<uintptr_t>(t.data);
  int width = rt::dtypeBytes(static_cast<rt::Dtype>(t.dtype));
  return {base + low * width, base + (high + 1) * width};
}

uint32_t find(std::vector<uint32_t>& parent, uint32_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

std::optional<CallSignature> CallSignature::of(const mxc_named_tensor* tensors, size_t nTensors,
                                               const mxc_named_scalar* scalars, size_t nScalars, uint32_t alignment) {
  if ((tensors == nullptr && nTensors != 0) || (scalars == nullptr && nScalars != 0)) return std::nullopt;
  if (alignment == 0 || alignment > kMaxAlignment || !std::has_single_bit(alignment)) return std::nullopt;
  CallSignature s;
  s.alignment_ = alignment;
  s.tensors_ = tensors;
  s.nTensors_ = nTensors;
  s.scalars_ = scalars;
  s.nScalars_ = nScalars;
  std::vector<std::pair<__int128, __int128>> spans;
  for (size_t i = 0; i < nTensors; ++i) {
    const mxc_named_tensor& t = tensors[i];
    if (t.name == nullptr || t.tensor.data == nullptr || t.tensor.ndim < 0 || t.tensor.ndim > MXRT_MAX_DIMS ||
        rt::dtypeBytes(static_cast<rt::Dtype>(t.tensor.dtype)) <= 0)
      return std::nullopt;
    spans.push_back(span(t.tensor));
  }
  // Tensors whose byte ranges overlap form a group, led by its first tensor.
  std::vector<uint32_t> parent(nTensors);
  std::iota(parent.begin(), parent.end(), 0u);
  for (uint32_t i = 0; i < nTensors; ++i)
    for (uint32_t j = i + 1; j < nTensors; ++j) {
      auto [lo, hi] = spans[i];
      auto [otherLo, otherHi] = spans[j];
      if (lo == hi || otherLo == otherHi || hi <= otherLo || otherHi <= lo) continue;
      uint32_t a = find(parent, i), b = find(parent, j);
      if (a != b) parent[std::max(a, b)] = std::min(a, b);
    }
  s.leader_.resize(nTensors);
  for (uint32_t i = 0; i < nTensors; ++i) s.leader_[i] = find(parent, i);

  std::vector<int64_t>& w = s.words_;
  w.reserve(2 + nTensors * 8 + nScalars);
  w.push_back(int64_t(nTensors));
  for (size_t i = 0; i < nTensors; ++i) {
    const mxrt_tensor& t = tensors[i].tensor;
    w.push_back(int64_t(t.dtype) << 32 | t.ndim);
    w.insert(w.end(), t.sizes, t.sizes + t.ndim);
    w.insert(w.end(), t.strides, t.strides + t.ndim);
    w.push_back(int64_t(s.realAddress(i) % alignment));
    w.push_back(s.leader_[i]);
    w.push_back(int64_t(s.realAddress(i) - s.groupAddress(i)));
  }
  w.push_back(int64_t(nScalars));
  for (size_t i = 0; i < nScalars; ++i) {
    int64_t bits;
    std::memcpy(&bits, &scalars[i].value, sizeof bits);
    w.push_back(bits);
  }
  return s;
}

const void* CallSignature::syntheticAddress(size_t i) const {
  uint32_t g = leader_[i];
  uintptr_t leaderAt = regionStart(g + 1) + kGroupOffset + groupAddress(i) % alignment_;
  return reinterpret_cast<const void*>(leaderAt + (realAddress(i) - groupAddress(i)));
}

void* CallSignature::syntheticScratch(size_t j) const {
  return reinterpret_cast<void*>(regionStart(nTensors_ + 1 + j));
}

std::optional<CallTemplate> CallTemplate::of(const CallSignature& signature, Launches launches,
                                             std::vector<size_t> scratchBytes) {
  CallTemplate t;
  for (size_t i = 0; i < signature.nTensors_; ++i) t.tensorNames_.emplace_back(signature.tensors_[i].name);
  for (size_t i = 0; i < signature.nScalars_; ++i)
    t.scalarNames_.emplace_back(signature.scalars_[i].name ? signature.scalars_[i].name : "");
  t.words_ = signature.words_;
  t.alignment_ = signature.alignment_;
  const size_t nTensors = signature.tensorCount();
  for (uint32_t l = 0; l < launches.size(); ++l) {
    const rt::PreparedLaunch& launch = launches[l].second;
    for (uint32_t a = 0; a < launch.args.size(); ++a) {
      if (launch.args[a].kind != rt::ArgKind::Pointer) continue;
      size_t region = reinterpret_cast<uintptr_t>(launch.args[a].value.ptr) >> kRegionBits;
      bool ours = region >= 1 && region <= nTensors + scratchBytes.size() &&
                  (region > nTensors || signature.leader_[region - 1] == region - 1);
      if (!ours) {
        if (launch.rows == 0) continue;  // never launched
        return std::nullopt;
      }
      t.slots_.push_back({l, a, uint32_t(region - 1), 0});
    }
  }
  t.launches_ = std::move(launches);
  t.scratchBytes_ = std::move(scratchBytes);
  return t;
}

bool CallTemplate::matches(const CallSignature& s) const {
  if (s.alignment_ != alignment_ || s.words_ != words_ || s.nTensors_ != tensorNames_.size() ||
      s.nScalars_ != scalarNames_.size())
    return false;
  for (size_t i = 0; i < tensorNames_.size(); ++i)
    if (tensorNames_[i] != s.tensors_[i].name) return false;
  for (size_t i = 0; i < scalarNames_.size(); ++i)
    if (s.scalars_[i].name == nullptr || scalarNames_[i] != s.scalars_[i].name) return false;
  return true;
}

Launches CallTemplate::launchesAt(const CallSignature& signature, const std::vector<void*>& scratch) const {
  // Each region moves by one amount: its real start less its synthetic start.
  const size_t nTensors = signature.tensorCount();
  std::vector<uintptr_t> shift(nTensors + scratch.size(), 0);
  for (size_t i = 0; i < nTensors; ++i)
    if (signature.leader_[i] == i)
      shift[i] = signature.realAddress(i) - reinterpret_cast<uintptr_t>(signature.syntheticAddress(i));
  for (size_t j = 0; j < scratch.size(); ++j)
    shift[nTensors + j] = reinterpret_cast<uintptr_t>(scratch[j]) -
                          reinterpret_cast<uintptr_t>(signature.syntheticScratch(j));
  Launches out = launches_;
  for (const PointerSlot& slot : slots_) {
    void*& ptr = out[slot.launch].second.args[slot.arg].value.ptr;
    ptr = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(ptr) + shift[slot.region]);
  }
  return out;
}

std::shared_ptr<const CallTemplate> CallCache::find(const CallSignature& signature) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)
    if ((*it)->matches(signature)) return *it;
  return nullptr;
}

void CallCache::insert(std::shared_ptr<const CallTemplate> entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (entries_.size() >= kCapacity) entries_.erase(entries_.begin());
  entries_.push_back(std::move(entry));
}

size_t CallCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace mxfp6::client
