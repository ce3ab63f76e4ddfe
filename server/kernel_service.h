// The gRPC face of the kernel store (proto/mxfp6/v1/kernel_service.proto): requests checked and
// bounded, store failures turned into gRPC status codes with their message, one log line per
// request (method, status, latency, peer).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <set>
#include <string>

#include "mxfp6/v1/kernel_service.grpc.pb.h"
#include "server/kernel_store.h"

namespace mxfp6::server {

struct ServiceLimits {
  size_t maxBatchKeys = 4096;         // keys in one BatchResolve
  size_t maxDslBytes = 256 * 1024;    // a Compile request's source
  size_t maxHaveHashes = 65536;       // hashes a client may say it holds
};

class KernelService final : public mxfp6::v1::KernelService::Service {
 public:
  KernelService(KernelStore& store, ServiceLimits limits) : store_(store), limits_(limits) {}

  grpc::Status Resolve(grpc::ServerContext*, const v1::ResolveRequest*, v1::ResolveReply*) override;
  grpc::Status BatchResolve(grpc::ServerContext*, const v1::BatchResolveRequest*, v1::BatchResolveReply*) override;
  grpc::Status Compile(grpc::ServerContext*, const v1::CompileRequest*, v1::CompileReply*) override;
  grpc::Status Pin(grpc::ServerContext*, const v1::PinRequest*, v1::PinReply*) override;
  grpc::Status Unpin(grpc::ServerContext*, const v1::UnpinRequest*, v1::UnpinReply*) override;
  grpc::Status PushMeasurements(grpc::ServerContext*, const v1::PushMeasurementsRequest*,
                                v1::PushMeasurementsReply*) override;
  grpc::Status List(grpc::ServerContext*, const v1::ListRequest*, v1::ListReply*) override;
  grpc::Status Stats(grpc::ServerContext*, const v1::StatsRequest*, v1::StatsReply*) override;

 private:
  /// Each launch's code object not yet in `sent`, with its bytes unless the client holds it.
  grpc::Status appendObjects(const ops::Plan& plan, const std::set<std::string>& held, std::set<std::string>& sent,
                             google::protobuf::RepeatedPtrField<v1::CodeObject>* out);

  KernelStore& store_;
  ServiceLimits limits_;
  std::atomic<int64_t> requests_{0}, objectsSent_{0}, objectBytesSent_{0};
};

}  // namespace mxfp6::server
