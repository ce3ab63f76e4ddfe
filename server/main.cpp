// mxfp6-server: the kernel service over one kernel database (docs/architecture.md, "The service").
//
//   mxfp6-server --db DB [--listen 127.0.0.1:PORT] [--read-only] [--dsl-dir DIR]
//                [--compile-timeout SECONDS] [--max-compiles N] [--jobs N]
//
// Listens on loopback unless another address is given (port 0: any free port). Prints one line
// "mxfp6-server: listening on ADDR ..." on stdout when it serves. --read-only serves a replica
// (a snapshot from `mxfp6-db snapshot`): every write is refused and nothing is compiled. SIGTERM
// or SIGINT: stop accepting, finish requests in flight (5 s), wait for running compiles, exit 0.
// Exit status: 0 after a clean shutdown, 1 when the database or the address cannot be opened,
// 2 on bad usage.
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "compiler/precompile/precompile.h"
#include "server/kernel_service.h"

#ifndef MXFP6_DSL_DIR
#define MXFP6_DSL_DIR "kernels_dsl"
#endif

namespace {

using namespace mxfp6;

const char* kUsage =
    "usage: mxfp6-server --db DB [--listen 127.0.0.1:PORT] [--read-only] [--dsl-dir DIR]\n"
    "                    [--compile-timeout SECONDS] [--max-compiles N] [--jobs N]\n";

int usage(const std::string& message) {
  std::cerr << "mxfp6-server: error: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> flags;
  const std::set<std::string> valued = {"--db", "--listen", "--dsl-dir", "--compile-timeout", "--max-compiles", "--jobs"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") return std::cout << kUsage, 0;
    if (a == "--read-only") {
      flags[a] = "1";
      continue;
    }
    if (!valued.count(a)) return usage("unknown argument '" + a + "'");
    if (i + 1 >= argc) return usage(a + " needs a value");
    flags[a] = argv[++i];
  }
  if (!flags.count("--db")) return usage("--db is required");
  std::string listen = flags.count("--listen") ? flags["--listen"] : "127.0.0.1:50051";

  // Signals go to one waiting thread, never to a request's thread.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGTERM);
  sigaddset(&stopSignals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  bool readOnly = flags.count("--read-only") > 0;
  auto db = autotune::KernelDb::open(flags["--db"], readOnly ? autotune::OpenMode::ReadOnly : autotune::OpenMode::ReadWrite);
  if (!db) return std::cerr << "mxfp6-server: error: " << db.status().message() << "\n", 1;
  server::StoreOptions storeOptions;
  storeOptions.dslDir = flags.count("--dsl-dir") ? flags["--dsl-dir"] : MXFP6_DSL_DIR;
  if (flags.count("--compile-timeout"))
    storeOptions.compileTimeout = std::chrono::seconds(std::max(1, std::atoi(flags["--compile-timeout"].c_str())));
  if (flags.count("--max-compiles")) storeOptions.maxCompilesInFlight = size_t(std::max(1, std::atoi(flags["--max-compiles"].c_str())));
  if (flags.count("--jobs")) storeOptions.compileJobs = unsigned(std::max(1, std::atoi(flags["--jobs"].c_str())));
  const std::string compiler = precompile::toolchainFingerprint();
  server::KernelStore store(db.take(), compiler, storeOptions);
  server::KernelService service(store, {});

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(16 << 20);  // a batch of keys and held hashes; DSL is bounded apart
  std::unique_ptr<grpc::Server> grpcServer = builder.BuildAndStart();
  if (!grpcServer || port == 0) {
    std::cerr << "mxfp6-server: error: cannot listen on " << listen << "\n";
    return 1;
  }
  std::string host = listen.substr(0, listen.rfind(':'));
  std::printf("mxfp6-server: listening on %s:%d (%s, %s; compiler %s)\n", host.c_str(), port, flags["--db"].c_str(),
              readOnly ? "read-only replica" : "writer", compiler.c_str());
  std::fflush(stdout);

  std::thread stopper([&] {
    int signal = 0;
    sigwait(&stopSignals, &signal);
    std::fprintf(stderr, "mxfp6-server: %s: shutting down\n", signal == SIGTERM ? "SIGTERM" : "SIGINT");
    grpcServer->GetHealthCheckService()->SetServingStatus(false);
    grpcServer->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  grpcServer->Wait();
  stopper.join();
  bool idle = store.drain(std::chrono::steady_clock::now() + storeOptions.compileTimeout);
  std::fprintf(stderr, "mxfp6-server: stopped%s\n", idle ? "" : " (a compile was still running)");
  return 0;
}
