// Stubs and requests for tests that speak to a server process directly.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "mxfp6/v1/kernel_service.grpc.pb.h"

namespace mxfp6::testing {

inline std::unique_ptr<v1::KernelService::Stub> stubFor(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(512 << 20);
  return v1::KernelService::NewStub(grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

/// A context with a deadline, as every real caller sets one.
inline std::unique_ptr<grpc::ClientContext> withDeadline(std::chrono::milliseconds ms = std::chrono::seconds(120)) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + ms);
  return context;
}

inline v1::OpKey opKey(const std::string& op, const std::string& variant, const std::string& target,
                       const std::string& sizes, int64_t rows) {
  v1::OpKey k;
  k.set_op(op);
  k.set_variant(variant);
  k.set_target(target);
  k.set_sizes(sizes);
  k.set_rows(rows);
  return k;
}

}  // namespace mxfp6::testing
