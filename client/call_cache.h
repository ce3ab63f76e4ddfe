// A resolved op's checked launches kept per call signature, so that a call repeated with new
// memory (a training step's ops: the same shapes every step, new activations) skips composing the
// plan and checking its launches, and only writes its addresses into launches checked before.
//
// Why that is sound: composition and the launch checks read a call's names, dtypes, shapes,
// strides and scalars; of its addresses they read only each pointer's alignment (the address
// modulo the kernels' alignment) and whether two tensors' memory overlaps (tensor_launch.cpp).
// The signature holds all of that: each address modulo the op's largest alignment, and which
// tensors' byte ranges overlap, as groups with each member's offset from the group's first
// tensor. A call's template is composed and checked at synthetic addresses with the same
// signature: every group in its own 2^44-byte region, offsets and residues kept. Two calls of one
// signature therefore pass or fail every check alike, and their launches differ only in pointer
// arguments, each of which lies in one region: a tensor group's or a scratch allocation's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/mxfp6_client.h"
#include "runtime/runtime.h"

namespace mxfp6::client {

/// The raw launches of a call, in order, each with the index of its plan launch.
using Launches = std::vector<std::pair<size_t, rt::PreparedLaunch>>;

/// A call's signature, read from the C arguments (which it points into: it lives within the
/// call).
class CallSignature {
 public:
  /// Nothing when the call is not one a template can serve (a null address, a dims count out of
  /// range, a largest alignment above 256, the scratch's guarantee): it takes the full checks,
  /// which name what is wrong.
  static std::optional<CallSignature> of(const mxc_named_tensor* tensors, size_t nTensors,
                                         const mxc_named_scalar* scalars, size_t nScalars, uint32_t alignment);

  size_t tensorCount() const { return nTensors_; }
  /// Where tensor i is placed when the template is composed.
  const void* syntheticAddress(size_t i) const;
  /// Where scratch allocation j is placed when the template is composed (256-byte aligned).
  void* syntheticScratch(size_t j) const;
  /// The real address of the first tensor of tensor i's group.
  uintptr_t groupAddress(size_t i) const { return realAddress(leader_[i]); }

 private:
  friend class CallTemplate;
  uintptr_t realAddress(size_t i) const { return reinterpret_cast<uintptr_t>(tensors_[i].tensor.data); }

  const mxc_named_tensor* tensors_ = nullptr;  // the caller's
  size_t nTensors_ = 0;
  const mxc_named_scalar* scalars_ = nullptr;
  size_t nScalars_ = 0;
  std::vector<uint32_t> leader_;  // per tensor: the first tensor of its overlap group
  std::vector<int64_t> words_;    // everything compared but the names
  uint32_t alignment_ = 1;
};

/// A call's launches composed and checked at synthetic addresses, and where each pointer
/// argument points: which region (a tensor group or a scratch allocation) at which offset.
class CallTemplate {
 public:
  /// Nothing when a pointer argument of a launch that runs lies in no region (never for launches
  /// composed from `signature`'s synthetic call; the caller then takes the full path).
  static std::optional<CallTemplate> of(const CallSignature& signature, Launches launches,
                                        std::vector<size_t> scratchBytes);

  bool matches(const CallSignature& signature) const;
  /// The scratch allocations a call needs, in the order composition asked for them.
  const std::vector<size_t>& scratchBytes() const { return scratchBytes_; }
  /// The launches with a call's addresses: its tensors' (by `signature`, which must match) and
  /// its scratch allocations' (one per scratchBytes() entry).
  Launches launchesAt(const CallSignature& signature, const std::vector<void*>& scratch) const;

 private:
  struct PointerSlot {
    uint32_t launch = 0, arg = 0;
    uint32_t region = 0;  // < tensors: a group's first tensor; else scratch allocation region - tensors
    int64_t offset = 0;   // bytes from the region's start
  };
  std::vector<std::string> tensorNames_, scalarNames_;
  std::vector<int64_t> words_;
  uint32_t alignment_ = 1;
  std::vector<size_t> scratchBytes_;
  Launches launches_;
  std::vector<PointerSlot> slots_;
};

/// The templates of one op, for at most kCapacity signatures (the oldest goes first); safe to
/// use from several threads.
class CallCache {
 public:
  static constexpr size_t kCapacity = 16;

  std::shared_ptr<const CallTemplate> find(const CallSignature& signature) const;
  void insert(std::shared_ptr<const CallTemplate> entry);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<const CallTemplate>> entries_;  // oldest first
};

}  // namespace mxfp6::client
