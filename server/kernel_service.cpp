#include "server/kernel_service.h"

#include <chrono>
#include <cstdio>
#include <set>

#include "autotune/resolve.h"

namespace mxfp6::server {
namespace {

using Clock = std::chrono::steady_clock;

grpc::StatusCode codeOf(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::BadRequest: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorKind::NotFound: return grpc::StatusCode::NOT_FOUND;
    case ErrorKind::ReadOnly: return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorKind::Overloaded: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorKind::Deadline: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorKind::Unavailable: return grpc::StatusCode::UNAVAILABLE;
    case ErrorKind::Internal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status toGrpc(const Failure& f) { return grpc::Status(codeOf(f.kind), f.message); }
grpc::Status badRequest(const std::string& message) { return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message); }

const char* codeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    default: return "INTERNAL";
  }
}

/// One line per request on stderr: method, status, latency, peer, and the error's message.
grpc::Status logged(const char* method, grpc::ServerContext* context, std::atomic<int64_t>& requests,
                    const std::function<grpc::Status()>& body) {
  ++requests;
  auto start = Clock::now();
  grpc::Status status = body();
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::string detail = status.ok() ? "" : " " + status.error_message().substr(0, 300);
  std::fprintf(stderr, "%s %s %.2f ms %s%s\n", method, codeName(status.error_code()), ms, context->peer().c_str(),
               detail.c_str());
  return status;
}

KeyRequest keyRequest(const v1::OpKey& k) { return {k.op(), k.variant(), k.target(), k.sizes(), k.rows()}; }

void fillKey(v1::OpKey* out, const autotune::Key& key) {
  out->set_op(key.family.op);
  out->set_variant(key.family.variant);
  out->set_target(key.family.target);
  out->set_sizes(key.family.sizes);
  out->set_rows(key.rows);
}

v1::Rule ruleOf(autotune::Rule rule) {
  switch (rule) {
    case autotune::Rule::Pinned: return v1::PINNED;
    case autotune::Rule::Exact: return v1::EXACT;
    case autotune::Rule::Nearest: return v1::NEAREST;
    case autotune::Rule::Default: return v1::DEFAULT;
  }
  return v1::RULE_UNSPECIFIED;
}

void fillResolved(v1::Resolved* out, const Answer& a) {
  const autotune::Resolution& r = a.resolution;
  fillKey(out->mutable_key(), r.key);
  out->set_rule(ruleOf(r.rule));
  out->set_from_rows(r.fromRows.value_or(0));
  out->set_plan_id(r.plan.id());
  out->set_plan_json(ops::planToJson(r.plan));
  for (const ops::PlanLaunch& l : r.plan.launches) out->add_objects(l.object);
  out->set_why(r.why);
  out->set_toolchain(r.key.family.toolchain);
  out->set_compiled_now(a.compiledNow);
}

void fillObject(v1::CodeObject* out, const autotune::CodeObject& o, bool withBytes) {
  out->set_sha256(o.sha256);
  out->set_kernel(o.kernel);
  out->set_target(o.target);
  out->set_format(o.format);
  out->set_config(o.config);
  out->set_metadata_json(o.metadata);
  if (withBytes) out->set_bytes(o.bytes);
}

std::chrono::system_clock::time_point deadlineOf(grpc::ServerContext* context) {
  // A request without a deadline gets gRPC's "infinite" one; the store bounds its wait anyway.
  return context->deadline();
}

}  // namespace

grpc::Status KernelService::appendObjects(const ops::Plan& plan, const std::set<std::string>& held,
                                          std::set<std::string>& sent,
                                          google::protobuf::RepeatedPtrField<v1::CodeObject>* out) {
  for (const ops::PlanLaunch& l : plan.launches) {
    if (!sent.insert(l.object).second) continue;
    auto object = store_.object(l.object);
    if (!object) return toGrpc(object.failure);
    bool withBytes = !held.count(l.object);
    fillObject(out->Add(), **object.value, withBytes);
    if (withBytes) {
      ++objectsSent_;
      objectBytesSent_ += int64_t((*object.value)->bytes.size());
    }
  }
  return grpc::Status::OK;
}

grpc::Status KernelService::Resolve(grpc::ServerContext* context, const v1::ResolveRequest* request,
                                    v1::ResolveReply* reply) {
  return logged("Resolve", context, requests_, [&]() -> grpc::Status {
    if (size_t(request->have_sha256_size()) > limits_.maxHaveHashes)
      return badRequest("the client lists more held objects than the limit of " + std::to_string(limits_.maxHaveHashes));
    Result<autotune::Key> key = store_.key(keyRequest(request->key()));
    if (!key) return toGrpc(key.failure);
    Result<Answer> answer = store_.resolve(*key.value, deadlineOf(context));
    if (!answer) return toGrpc(answer.failure);
    fillResolved(reply->mutable_result(), *answer.value);
    std::set<std::string> held(request->have_sha256().begin(), request->have_sha256().end()), sent;
    return appendObjects(answer.value->resolution.plan, held, sent, reply->mutable_objects());
  });
}

grpc::Status KernelService::BatchResolve(grpc::ServerContext* context, const v1::BatchResolveRequest* request,
                                         v1::BatchResolveReply* reply) {
  return logged("BatchResolve", context, requests_, [&]() -> grpc::Status {
    if (request->keys_size() == 0) return badRequest("no keys");
    if (size_t(request->keys_size()) > limits_.maxBatchKeys)
      return badRequest(std::to_string(request->keys_size()) + " keys in one batch; the limit is " +
                        std::to_string(limits_.maxBatchKeys));
    if (size_t(request->have_sha256_size()) > limits_.maxHaveHashes)
      return badRequest("the client lists more held objects than the limit of " + std::to_string(limits_.maxHaveHashes));
    std::set<std::string> held(request->have_sha256().begin(), request->have_sha256().end()), sent;
    for (const v1::OpKey& k : request->keys()) {
      if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
      Result<autotune::Key> key = store_.key(keyRequest(k));
      Result<Answer> answer = key ? store_.resolve(*key.value, deadlineOf(context)) : Result<Answer>(key.failure);
      if (!answer) {
        ErrorKind kind = answer.failure.kind;
        // Overload, deadline, shutdown and internal errors fail the batch: retrying it is the
        // client's move. A key that is wrong or has no plan fails alone.
        if (kind != ErrorKind::BadRequest && kind != ErrorKind::NotFound) return toGrpc(answer.failure);
        auto* e = reply->add_errors();
        *e->mutable_key() = k;
        e->set_message(answer.failure.message);
        continue;
      }
      fillResolved(reply->add_results(), *answer.value);
      grpc::Status s = appendObjects(answer.value->resolution.plan, held, sent, reply->mutable_objects());
      if (!s.ok()) return s;
    }
    return grpc::Status::OK;
  });
}

grpc::Status KernelService::Compile(grpc::ServerContext* context, const v1::CompileRequest* request,
                                    v1::CompileReply* reply) {
  return logged("Compile", context, requests_, [&]() -> grpc::Status {
    if (request->source().size() > limits_.maxDslBytes)
      return badRequest("DSL source of " + std::to_string(request->source().size()) + " bytes; the limit is " +
                        std::to_string(limits_.maxDslBytes));
    if (request->source().find('\0') != std::string::npos) return badRequest("the DSL source contains a NUL byte");
    if (request->kernel().empty()) return badRequest("no kernel named");
    std::string file = request->file_name().empty() ? "<request>" : request->file_name();
    auto r = store_.compile(file, request->source(), request->kernel(), request->target(), request->config(),
                            deadlineOf(context));
    if (!r) return toGrpc(r.failure);
    fillObject(reply->mutable_object(), r.value->first, true);
    reply->set_cached(r.value->second);
    return grpc::Status::OK;
  });
}

grpc::Status KernelService::Pin(grpc::ServerContext* context, const v1::PinRequest* request, v1::PinReply* reply) {
  return logged("Pin", context, requests_, [&]() -> grpc::Status {
    Result<autotune::Key> key = store_.key(keyRequest(request->key()));
    if (!key) return toGrpc(key.failure);
    auto r = store_.pin(*key.value, request->plan_id(), request->config(), request->who(), request->why(),
                        request->expires_at());
    if (!r) return toGrpc(r.failure);
    reply->set_plan_id(*r.value);
    return grpc::Status::OK;
  });
}

grpc::Status KernelService::Unpin(grpc::ServerContext* context, const v1::UnpinRequest* request, v1::UnpinReply*) {
  return logged("Unpin", context, requests_, [&]() -> grpc::Status {
    Result<autotune::Key> key = store_.key(keyRequest(request->key()));
    if (!key) return toGrpc(key.failure);
    auto r = store_.unpin(*key.value);
    return r ? grpc::Status::OK : toGrpc(r.failure);
  });
}

grpc::Status KernelService::PushMeasurements(grpc::ServerContext* context, const v1::PushMeasurementsRequest* request,
                                             v1::PushMeasurementsReply* reply) {
  return logged("PushMeasurements", context, requests_, [&]() -> grpc::Status {
    Result<autotune::Key> key = store_.key(keyRequest(request->key()));
    if (!key) return toGrpc(key.failure);
    if (!request->toolchain().empty() && request->toolchain() != key.value->family.toolchain)
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "measurements of another toolchain (" + request->toolchain() + "); this server keys " +
                              request->key().op() + " under " + key.value->family.toolchain);
    if (request->winner().empty()) return badRequest("no winner");
    autotune::TuningRun run;
    run.key = *key.value;
    for (const v1::PlanTiming& t : request->timings())
      run.timings.push_back({t.plan_id(), t.passed_gate(), t.gate_message(), {t.samples_us().begin(), t.samples_us().end()}});
    run.selection = {*key.value,
                     request->winner(),
                     {request->equivalent().begin(), request->equivalent().end()},
                     request->rule(),
                     request->tuned_at().empty() ? autotune::utcNow() : request->tuned_at(),
                     request->tuner().empty() ? context->peer() : request->tuner(),
                     0};
    auto r = store_.pushMeasurements(std::move(run));
    if (!r) return toGrpc(r.failure);
    reply->set_run_id(*r.value);
    return grpc::Status::OK;
  });
}

grpc::Status KernelService::List(grpc::ServerContext* context, const v1::ListRequest* request, v1::ListReply* reply) {
  return logged("List", context, requests_, [&]() -> grpc::Status {
    autotune::ListFilter filter{request->op(), request->target(), request->sizes(),
                                request->rows() ? std::optional<int64_t>(request->rows()) : std::nullopt};
    auto entries = store_.list(filter);
    if (!entries) return toGrpc(entries.failure);
    for (const autotune::KeyEntry& e : *entries.value) {
      auto* out = reply->add_entries();
      fillKey(out->mutable_key(), e.key);
      out->set_toolchain(e.key.family.toolchain);
      if (e.selection) {
        out->set_winner(e.selection->winner);
        out->set_rule(e.selection->rule);
        out->set_tuned_at(e.selection->tunedAt);
      }
      if (e.pin) {
        out->set_pinned_plan(e.pin->planId);
        out->set_pin_why(e.pin->why);
      }
    }
    return grpc::Status::OK;
  });
}

grpc::Status KernelService::Stats(grpc::ServerContext* context, const v1::StatsRequest*, v1::StatsReply* reply) {
  return logged("Stats", context, requests_, [&]() -> grpc::Status {
    reply->set_requests(requests_);
    reply->set_family_compiles(store_.counters().familyCompiles);
    reply->set_kernel_compiles(store_.counters().kernelCompiles);
    reply->set_compile_cache_hits(store_.counters().compileCacheHits);
    reply->set_objects_sent(objectsSent_);
    reply->set_object_bytes_sent(objectBytesSent_);
    reply->set_read_only(store_.readOnly());
    reply->set_toolchain(store_.compiler());
    return grpc::Status::OK;
  });
}

}  // namespace mxfp6::server
