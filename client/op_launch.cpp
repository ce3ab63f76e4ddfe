// Running a resolved op from tensors through the C ABI (client/mxfp6_client.h, mxc_op_*): the
// plan's launches composed by ops::compose, the one layer every caller runs plans through, and
// bound by ops::bindParams. What this file adds is the C edge: named C tensors in, the call
// checked against the key it was resolved for, every launch checked (rt::prepareLaunch) before the
// first is enqueued, the raw launches those checks prepared enqueued without checking twice, and
// statuses turned into mxrt_status codes with a message once. mxc_op_launch is mxc_op_prepare's
// checks followed by mxc_launches_enqueue's, on the one path below (prepare, enqueue), except that
// its checked launches are kept per call signature (client/call_cache.h): a call whose signature
// was seen only writes its addresses into them.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <utility>
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
using mxfp6::client::CallSignature;
using mxfp6::client::CallTemplate;
using mxfp6::client::Launches;
using mxfp6::client::setError;
namespace ops = mxfp6::ops;
namespace rt = mxfp6::rt;

}  // namespace

/// A call's raw launches, checked once (mxc_op_prepare), for enqueuing many times.
struct mxc_launches {
  const mxc_op* op = nullptr;
  Launches launches;  // (plan launch, its raw launch), in order
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

  Launches prepared;  // (launch index, its raw launch), in order

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
Expected<Launches> checkedLaunches(const mxc_op& op, const ops::OpCall& call, const ops::ScratchAllocator& scratch) {
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

/// The caller's scratch allocator (mxc_scratch_fn) with the contract's checks; `failed` tells an
/// allocator's failure (MXRT_ERROR_INTERNAL) from a plan needing scratch where none was given (an
/// argument error).
struct CallerScratch {
  mxc_scratch_fn fn;
  void* user;
  bool failed = false;

  Expected<void*> operator()(size_t bytes) {
    if (fn == nullptr)
      return Status::error("the plan needs " + std::to_string(bytes) + " bytes of scratch and no allocator was given");
    void* ptr = nullptr;
    if (fn(user, bytes, &ptr) != 0 || ptr == nullptr) {
      failed = true;
      return Status::error("the scratch allocator could not allocate " + std::to_string(bytes) + " bytes");
    }
    if (reinterpret_cast<uintptr_t>(ptr) % 256 != 0) {
      failed = true;
      return Status::error("the scratch allocator returned memory that is not 256-byte aligned");
    }
    return ptr;
  }
  int code() const { return failed ? MXRT_ERROR_INTERNAL : MXRT_ERROR_INVALID_ARGUMENT; }
};

/// The call's launches, composed and checked, with scratch from the caller's allocator; an
/// mxrt_status.
int prepare(const mxc_op& op, const mxc_named_tensor* tensors, size_t nTensors, const mxc_named_scalar* scalars,
            size_t nScalars, mxc_scratch_fn scratch, void* scratchUser, Launches& launches, char* error,
            size_t errorSize) {
  auto call = callOf(op, tensors, nTensors, scalars, nScalars);
  if (!call) return fail(error, errorSize, MXRT_ERROR_INVALID_ARGUMENT, op.key + ": " + call.status().message());
  CallerScratch allocator{scratch, scratchUser};
  auto checked = checkedLaunches(op, *call, [&](size_t bytes) { return allocator(bytes); });
  if (!checked) return fail(error, errorSize, allocator.code(), op.key + ": " + checked.status().message());
  launches = checked.take();
  return MXRT_SUCCESS;
}

/// The template of a call's signature: the op's, or composed and checked now at the signature's
/// synthetic addresses and kept. Null when those checks fail (the full path then reports the
/// failure with the call's own addresses) or the launches do not fit a template.
std::shared_ptr<const CallTemplate> templateOf(const mxc_op& op, const CallSignature& signature,
                                               const mxc_named_tensor* tensors, const mxc_named_scalar* scalars,
                                               size_t nScalars) {
  if (auto found = op.calls.find(signature)) return found;
  std::vector<mxc_named_tensor> synthetic(tensors, tensors + signature.tensorCount());
  for (size_t i = 0; i < synthetic.size(); ++i) synthetic[i].tensor.data = const_cast<void*>(signature.syntheticAddress(i));
  auto call = callOf(op, synthetic.data(), synthetic.size(), scalars, nScalars);
  if (!call) return nullptr;
  std::vector<size_t> scratchBytes;
  auto checked = checkedLaunches(op, *call, [&](size_t bytes) -> Expected<void*> {
    scratchBytes.push_back(bytes);
    return signature.syntheticScratch(scratchBytes.size() - 1);
  });
  if (!checked) return nullptr;
  auto made = CallTemplate::of(signature, checked.take(), std::move(scratchBytes));
  if (!made) return nullptr;
  auto entry = std::make_shared<const CallTemplate>(std::move(*made));
  op.calls.insert(entry);
  return entry;
}

/// A call's launches from its signature's template, with the call's addresses and scratch from
/// the caller's allocator. Returns -1 where no template serves the call (take the full path),
/// else an mxrt_status.
int launchesFromTemplate(const mxc_op& op, const mxc_named_tensor* tensors, size_t nTensors,
                         const mxc_named_scalar* scalars, size_t nScalars, mxc_scratch_fn scratch, void* scratchUser,
                         Launches& launches, char* error, size_t errorSize) {
  auto signature = CallSignature::of(tensors, nTensors, scalars, nScalars, op.alignment);
  if (!signature) return -1;
  auto entry = templateOf(op, *signature, tensors, scalars, nScalars);
  if (!entry) return -1;
  CallerScratch allocator{scratch, scratchUser};
  std::vector<void*> memory;
  for (size_t bytes : entry->scratchBytes()) {
    auto ptr = allocator(bytes);
    if (!ptr) return fail(error, errorSize, allocator.code(), op.key + ": " + ptr.status().message());
    memory.push_back(*ptr);
  }
  launches = entry->launchesAt(*signature, memory);
  return MXRT_SUCCESS;
}

/// Enqueues launches [first, first + count) as they were checked, skipping empty ones.
int enqueue(const mxc_op& op, const Launches& launches, void* stream, size_t first, size_t count, char* error,
            size_t errorSize) {
  if (op.device == nullptr)
    return fail(error, errorSize, MXRT_ERROR_INVALID_ARGUMENT, op.key + ": not loaded on a device (mxc_op_load)");
  if (first > launches.size() || count > launches.size() - first)
    return fail(error, errorSize, MXRT_ERROR_INVALID_ARGUMENT,
                op.key + ": " + std::to_string(count) + " launches from launch " + std::to_string(first) +
                    " run past its " + std::to_string(launches.size()) + " launches");
  for (size_t i = first; i < first + count; ++i) {
    const auto& [index, prepared] = launches[i];
    if (prepared.rows == 0) continue;  // an empty batch: nothing to do
    const ops::PlanLaunch& spec = op.plan.launches[index];
    Status s = op.kernels[index]->launch(prepared.grid, stream, prepared.args);
    if (!s)
      return fail(error, errorSize, MXRT_ERROR_DRIVER, op.key + ": " + spec.kernel + " (" + spec.role + "): " + s.message());
  }
  return MXRT_SUCCESS;
}

}  // namespace

namespace mxfp6::client {

/// The launch's config completed with the tunables its object was compiled with at their
/// defaults (a plan may leave those out: the object's metadata lists them all), so composition
/// reads every tunable it needs (a column packer's HB) whatever the plan's spelling. The plan's id
/// keeps the spelling it was given.
void completeConfig(ops::PlanLaunch& launch, const std::string& metadataJson) {
  auto meta = nlohmann::json::parse(metadataJson, nullptr, false);
  auto config = ops::parseConfig(launch.config);
  if (meta.is_discarded() || !config || !meta.contains("config") || !meta.contains("tunables")) return;
  for (const auto& name : meta["tunables"]) {
    if (!name.is_string() || config->count(name.get<std::string>())) continue;
    const auto& value = meta["config"].value(name.get<std::string>(), nlohmann::json());
    if (value.is_number_integer()) (*config)[name.get<std::string>()] = std::to_string(value.get<int64_t>());
  }
  launch.config = ops::canonicalConfig(*config);
}

Expected<std::unique_ptr<mxc_op>> makeOp(const std::string& keyText, const OpKey& key, ops::Plan plan,
                                         std::string planId, std::vector<Object> objects) {
  auto op = std::make_unique<mxc_op>();
  op->key = keyText;
  ASSIGN_OR_RETURN(op->problem, ops::problemFromKey(key.op, key.variant, key.sizes, key.rows));
  ops::OpArgs declared = ops::declareArgs(op->problem);
  for (const ops::TensorDecl& t : declared.tensors) op->tensorNames.insert(t.name);
  for (const auto& [name, value] : declared.scalars) op->scalarNames.insert(name);
  op->plan = std::move(plan);
  op->planId = planId.empty() ? op->plan.id() : std::move(planId);
  if (objects.size() != op->plan.launches.size())
    return Status::error("the plan has " + std::to_string(op->plan.launches.size()) + " launches but " +
                         std::to_string(objects.size()) + " code objects");
  for (size_t i = 0; i < objects.size(); ++i) {
    Object& o = objects[i];
    ASSIGN_OR_RETURN(rt::KernelMetadata metadata, Client::metadataOf(o));
    completeConfig(op->plan.launches[i], o.metadataJson);
    op->alignment = std::max(op->alignment, metadata.alignment);
    op->metadata.push_back(std::move(metadata));
    op->objects.push_back(std::move(o));
  }
  return op;
}

}  // namespace mxfp6::client

extern "C" {

mxc_op* mxc_op_create(const mxc_resolution* r, size_t i, char* error, size_t error_size) {
  mxc_op* created = nullptr;
  guarded(error, error_size, [&] {
    if (r == nullptr || i >= r->entries.size())
      return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "no op " + std::to_string(i) + " in the resolution");
    const mxc_resolution::Entry& e = r->entries[i];
    if (e.op == nullptr) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, e.key + ": " + e.error);
    std::vector<mxfp6::client::Object> objects;
    for (const mxfp6::client::Object* o : e.op->objects) objects.push_back(*o);
    auto op = mxfp6::client::makeOp(e.key, e.op->key, e.op->plan, e.op->planId, std::move(objects));
    if (!op) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, e.key + ": " + op.status().message());
    created = op.take().release();
    return int(MXRT_SUCCESS);
  });
  return created;
}

void mxc_op_free(mxc_op* op) { delete op; }

const char* mxc_op_plan(const mxc_op* op) { return op ? op->planId.c_str() : ""; }

size_t mxc_op_signatures(const mxc_op* op) { return op ? op->calls.size() : 0; }

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
    Launches launches;
    int status = launchesFromTemplate(*op, tensors, n_tensors, scalars, n_scalars, scratch, scratch_user, launches,
                                      error, error_size);
    if (status == -1)
      status = prepare(*op, tensors, n_tensors, scalars, n_scalars, scratch, scratch_user, launches, error, error_size);
    if (status != MXRT_SUCCESS) return status;
    return enqueue(*op, launches, stream, 0, launches.size(), error, error_size);
  });
}

mxc_launches* mxc_op_prepare(const mxc_op* op, const mxc_named_tensor* tensors, size_t n_tensors,
                             const mxc_named_scalar* scalars, size_t n_scalars, mxc_scratch_fn scratch,
                             void* scratch_user, char* error, size_t error_size) {
  mxc_launches* created = nullptr;
  guarded(error, error_size, [&] {
    if (op == nullptr) return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "mxc_op_prepare: op is NULL");
    auto launches = std::make_unique<mxc_launches>();
    launches->op = op;
    int status = prepare(*op, tensors, n_tensors, scalars, n_scalars, scratch, scratch_user, launches->launches,
                         error, error_size);
    if (status == MXRT_SUCCESS) created = launches.release();
    return status;
  });
  return created;
}

void mxc_launches_free(mxc_launches* launches) { delete launches; }

size_t mxc_launches_count(const mxc_launches* launches) { return launches ? launches->launches.size() : 0; }

int mxc_launches_info(const mxc_launches* launches, size_t i, size_t* plan_launch, uint32_t grid[3]) {
  if (launches == nullptr || i >= launches->launches.size()) return -1;
  const auto& [index, prepared] = launches->launches[i];
  if (plan_launch != nullptr) *plan_launch = index;
  if (grid != nullptr) std::copy(prepared.grid.begin(), prepared.grid.end(), grid);
  return 0;
}

int mxc_launches_enqueue(const mxc_launches* launches, void* stream, size_t first, size_t count, char* error,
                         size_t error_size) {
  return guarded(error, error_size, [&] {
    if (launches == nullptr)
      return fail(error, error_size, MXRT_ERROR_INVALID_ARGUMENT, "mxc_launches_enqueue: launches is NULL");
    return enqueue(*launches->op, launches->launches, stream, first, count, error, error_size);
  });
}

}  // extern "C"
