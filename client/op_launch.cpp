// Running a resolved op from tensors through the C ABI (client/mxfp6_client.h, mxc_op_*): the
// plan's launches composed by ops::compose, the one layer every caller runs plans through, and
// bound by ops::bindParams. What this file adds is the C edge: named C tensors in, the call
// checked against the key it was resolved for, every launch checked (rt::prepareLaunch) before the
// first is enqueued, the raw launches those checks prepared enqueued without checking twice, and
// statuses turned into mxrt_status codes with a message once.
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "client/c_handles.h"
#include "client/client.h"
#include "client/mxfp6_client.h"
#include "ops/compose.h"
#include "ops/execute.h"
#include "ops/op_args.h"
#include "runtime/c_handles.h"

namespace {

using mxfp6::Expected;
using mxfp6::Status;
using mxfp6::client::Client;
using mxfp6::client::setError;
namespace ops = mxfp6::ops;
namespace rt = mxfp6::rt;

}  // namespace

struct mxc_op {
  std::string key;           // the resolved key's text
  ops::Problem problem;      // the key's problem (its variant, size, heads, samples)
  ops::Plan plan;
  std::string planId;
  std::vector<mxfp6::client::Object> objects;  // per launch
  std::vector<rt::KernelMetadata> metadata;    // per launch
  mxrt_device* device = nullptr;               // where `kernels` are loaded
  std::vector<std::unique_ptr<rt::LoadedKernel>> kernels;
  std::set<std::string> tensorNames, scalarNames;  // the op's arguments (ops::declareArgs), once
};

namespace {

/// Scratch at addresses no tensor has, never dereferenced: what mxc_op_check composes with.
class PlaceholderScratch {
 public:
  Expected<void*> operator()(size_t bytes) {
    uintptr_t at = next_;
    next_ += (bytes + 255) / 256 * 256 + 256;
    return reinterpret_cast<void*>(at);
  }

 private:
  uintptr_t next_ = uintptr_t{1} << 46;
};

/// Checks a step's arguments against its kernel's signature without launching, and keeps the
/// raw launch each check prepares, so that the launches enqueue what was checked.
class CheckingLauncher final : public ops::Launcher {
 public:
  explicit CheckingLauncher(const std::vector<rt::KernelMetadata>& metadata) : metadata_(metadata) {}
  Status launch(const ops::Plan& plan, const ops::Step& step) override {
    if (step.launch >= metadata_.size())
      return Status::error("plan " + plan.id() + ": no code object for launch " + std::to_string(step.launch));
    ASSIGN_OR_RETURN(std::vector<rt::ParamArg> params, ops::bindParams(metadata_[step.launch], step));
    auto p = rt::prepareLaunch(metadata_[step.launch], params);
    if (!p)
      return Status::error(plan.launches[step.launch].kernel + " (" + plan.launches[step.launch].role +
                           "): " + p.status().message());
    prepared.push_back({step.launch, p.take()});
    return Status::ok();
  }

  std::vector<std::pair<size_t, rt::PreparedLaunch>> prepared;  // (launch index, its raw launch), in order

 private:
  const std::vector<rt::KernelMetadata>& metadata_;
};

std::string names(const std::set<std::string>& set) {
  std::string out;
  for (const std::string& n : set) out += (out.empty() ? "" : ", ") + n;
  return out;
}

/// The C call as an OpCall, checked against the op's declared arguments and the resolved key:
/// an unknown or repeated name, or a shape of another key family, is an error naming it.
Expected<ops::OpCall> callOf(const mxc_op& op, const mxc_named_tensor* tensors, size_t nTensors,
                             const mxc_named_scalar* scalars, size_t nScalars) {
  if (tensors == nullptr && nTensors != 0) return Status::error("tensors is NULL");
  if (scalars == nullptr && nScalars != 0) return Status::error("scalars is NULL");
  const std::set<std::string>& tensorNames = op.tensorNames;
  const std::set<std::string>& scalarNames = op.scalarNames;
  ops::OpCall call;
  for (size_t i = 0; i < nTensors; ++i) {
    std::string name = tensors[i].name ? tensors[i].name : "";
    if (!tensorNames.count(name))
      return Status::error(op.problem.op->name + " takes no tensor '" + name + "' (its tensors: " +
                           names(tensorNames) + ")");
    const mxrt_tensor& t = tensors[i].tensor;
    if (t.ndim < 0 || t.ndim > MXRT_MAX_DIMS)
      return Status::error("argument '" + name + "' has " + std::to_string(t.ndim) + " dims");
    rt::TensorArg arg;
    arg.data = t.data;
    arg.dtype = static_cast<rt::Dtype>(t.dtype);
    arg.ndim = t.ndim;
    for (int d = 0; d < t.ndim; ++d) {
      arg.sizes[d] = t.sizes[d];
      arg.strides[d] = t.strides[d];
    }
    if (!call.tensors.emplace(name, arg).second) return Status::error("tensor '" + name + "' given twice");
  }
  for (size_t i = 0; i < nScalars; ++i) {
    std::string name = scalars[i].name ? scalars[i].name : "";
    if (!scalarNames.count(name))
      return Status::error(op.problem.op->name + " takes no scalar '" + name + "'" +
                           (scalarNames.empty() ? "" : " (its scalars: " + names(scalarNames) + ")"));
    if (!call.scalars.emplace(name, scalars[i].value).second)
      return Status::error("scalar '" + name + "' given twice");
  }
  return call;
}

/// Composes the call and checks every launch of it; the raw launches, ready to enqueue.
Expected<std::vector<std::pair<size_t, rt::PreparedLaunch>>> checkedLaunches(const mxc_op& op, const ops::OpCall& call,
                                                                             const ops::ScratchAllocator& scratch) {
  ASSIGN_OR_RETURN(ops::Problem problem, ops::problemOf(*op.problem.op, op.problem.variant, call));
  // A plan serves every M of its key family; another family (heads, samples, size) is another key.
  if (problem.variantText() != op.problem.variantText() || problem.sizes() != op.problem.sizes())
    return Status::error("the call is " + problem.variantText() + (problem.sizes().empty() ? "" : " " + problem.sizes()) +
                         " but the op was resolved for " + op.key + ": resolve the call's key");
  ASSIGN_OR_RETURN(std::vector<ops::Step> steps, ops::compose(op.plan, problem, call, scratch));
  CheckingLauncher checker(op.metadata);
  RETURN_IF_ERROR(ops::runSteps(op.plan, steps, checker));
  return std::move(checker.prepared);
}

/// Runs `body`, turning an escaping exception into MXRT_ERROR_INTERNAL with its message.
template <typename Body>
int guarded(char* error, size_t size, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    setError(error, size, "out of host memory");
  } catch (const std::exception& e) {
    setError(error, size, e.what());
  } catch (...) {
    setError(error, size, "unknown exception");
  }
  return MXRT_ERROR_INTERNAL;
}

int fail(char* error, size_t size, int code, const std::string& message) {
  setError(error, size, message);
  return code;
}

}  // namespace

extern "C" {

mxc_op* mxc_op_create(const mxc_resolution* r, size_t i, char* error, size_t error_size) {
  mxc_op* created = nullptr;
  guarded(error, error_size, [&] {
    if (r == nullptr || i >= r->entries.size())
      return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "no op " + std::to_string(i) + " in the resolution");
    const mxc_resolution::Entry& e = r->entries[i];
    if (e.op == nullptr) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, e.key + ": " + e.error);
    auto op = std::make_unique<mxc_op>();
    op->key = e.key;
    const mxfp6::client::OpKey& k = e.op->key;
    auto problem = ops::problemFromKey(k.op, k.variant, k.sizes, k.rows);
    if (!problem) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, e.key + ": " + problem.status().message());
    op->problem = *problem;
    ops::OpArgs declared = ops::declareArgs(op->problem);
    for (const ops::TensorDecl& t : declared.tensors) op->tensorNames.insert(t.name);
    for (const auto& [name, value] : declared.scalars) op->scalarNames.insert(name);
    op->plan = e.op->plan;
    op->planId = e.op->planId.empty() ? e.op->plan.id() : e.op->planId;
    if (e.op->objects.size() != op->plan.launches.size())
      return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT,
                  e.key + ": the plan has " + std::to_string(op->plan.launches.size()) + " launches but " +
                      std::to_string(e.op->objects.size()) + " code objects");
    for (const mxfp6::client::Object* o : e.op->objects) {
      auto metadata = Client::metadataOf(*o);
      if (!metadata) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, e.key + ": " + metadata.status().message());
      op->objects.push_back(*o);
      op->metadata.push_back(metadata.take());
    }
    created = op.release();
    return int(MXRT_SUCCESS);
  });
  return created;
}

void mxc_op_free(mxc_op* op) { delete op; }

const char* mxc_op_plan(const mxc_op* op) { return op ? op->planId.c_str() : ""; }

int mxc_op_load(mxc_op* op, mxrt_device* device, char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    if (op == nullptr) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "mxc_op_load: op is NULL");
    if (device == nullptr) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "mxc_op_load: device is NULL");
    if (op->device == device) return int(MXRT_SUCCESS);
    if (op->device != nullptr)
      return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT,
                  op->key + " is loaded on another device: use one mxc_op per device");
    mxfp6::client::ResolvedOp resolved;
    resolved.plan = op->plan;
    for (const auto& o : op->objects) resolved.objects.push_back(&o);
    auto kernels = Client::load(*device->device, resolved);
    if (!kernels) return fail(error, error_size, MXRT_ERROR_DRIVER, op->key + ": " + kernels.status().message());
    op->kernels = kernels.take();
    op->device = device;
    return int(MXRT_SUCCESS);
  });
}

int mxc_op_check(const mxc_op* op, const mxc_named_tensor* tensors, size_t n_tensors, const mxc_named_scalar* scalars,
                 size_t n_scalars, char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    if (op == nullptr) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "mxc_op_check: op is NULL");
    auto call = callOf(*op, tensors, n_tensors, scalars, n_scalars);
    if (!call) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, op->key + ": " + call.status().message());
    PlaceholderScratch placeholder;
    auto steps = checkedLaunches(*op, *call, [&](size_t bytes) { return placeholder(bytes); });
    if (!steps) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, op->key + ": " + steps.status().message());
    return int(MXRT_SUCCESS);
  });
}

int mxc_op_launch(const mxc_op* op, void* stream, const mxc_named_tensor* tensors, size_t n_tensors,
                  const mxc_named_scalar* scalars, size_t n_scalars, mxc_scratch_fn scratch, void* scratch_user,
                  char* error, size_t error_size) {
  return guarded(error, error_size, [&] {
    if (op == nullptr) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "mxc_op_launch: op is NULL");
    auto call = callOf(*op, tensors, n_tensors, scalars, n_scalars);
    if (!call) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, op->key + ": " + call.status().message());
    // A scratch failure is the allocator's, not the caller's arguments: told apart from them.
    bool scratchFailed = false;
    ops::ScratchAllocator allocate = [&](size_t bytes) -> Expected<void*> {
      if (scratch == nullptr)
        return Status::error("the plan needs " + std::to_string(bytes) + " bytes of scratch and no allocator was given");
      void* ptr = nullptr;
      if (scratch(scratch_user, bytes, &ptr) != 0 || ptr == nullptr) {
        scratchFailed = true;
        return Status::error("the scratch allocator could not allocate " + std::to_string(bytes) + " bytes");
      }
      if (reinterpret_cast<uintptr_t>(ptr) % 256 != 0) {
        scratchFailed = true;
        return Status::error("the scratch allocator returned memory that is not 256-byte aligned");
      }
      return ptr;
    };
    auto launches = checkedLaunches(*op, *call, allocate);
    if (!launches)
      return fail(error, error_size, scratchFailed ? MXRT_ERROR_INTERNAL : MXRT_ERROR_INVALID_ARGUMENT,
                  op->key + ": " + launches.status().message());
    if (op->device == nullptr)
      return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, op->key + ": not loaded on a device (mxc_op_load)");
    // Every launch was checked above; enqueue the raw launches those checks prepared.
    for (const auto& [index, prepared] : *launches) {
      if (prepared.rows == 0) continue;  // an empty batch: nothing to do
      const ops::PlanLaunch& spec = op->plan.launches[index];
      Status s = op->kernels[index]->launch(prepared.grid, stream, prepared.args);
      if (!s) return fail(error, error_size, MXRT_ERROR_DRIVER, op->key + ": " + spec.kernel + " (" + spec.role + "): " + s.message());
    }
    return int(MXRT_SUCCESS);
  });
}

}  // extern "C"
