// launch_bench: host microseconds per op launch from C++, through the client's C ABI as a
// training process written in C++ would launch (mxc_op_launch: after the first call of a
// signature, the addresses written into launches checked once, then the kernel launches), with
// its arguments prepared once; and, for comparison, the same call composed and checked in full
// every time (mxc_op_prepare, then mxc_launches_enqueue). bench/launch_overhead.py runs it beside
// the Python and Triton launches and records the run.
//
//   launch_bench --db DB [--calls N] [--repeats R] [--tokens T]
//
// The op is LN-modulate forward per sample (x [T, 3072], one sample): one kernel launch. Timed as
// bench/measure.py's host_us_per_call: the best of R loops of N back-to-back launches, the queue
// drained between loops so that it never fills and blocks the host; at the default T = 1 (a
// one-program grid) a launch's GPU time is below its host time. Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "client/mxfp6_client.h"

namespace {

using Clock = std::chrono::steady_clock;

int fail(const std::string& what, const char* error) {
  std::fprintf(stderr, "launch_bench: %s: %s\n", what.c_str(), error);
  return 1;
}

mxrt_tensor tensor2d(void* data, mxrt_dtype dtype, int64_t rows, int64_t cols) {
  mxrt_tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = cols ? 2 : 1;
  t.sizes[0] = rows;
  t.strides[0] = cols ? cols : 1;
  if (cols) {
    t.sizes[1] = cols;
    t.strides[1] = 1;
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db;
  long calls = 200, repeats = 50, tokens = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--db") db = argv[i + 1];
    else if (a == "--calls") calls = std::stol(argv[i + 1]);
    else if (a == "--repeats") repeats = std::stol(argv[i + 1]);
    else if (a == "--tokens") tokens = std::stol(argv[i + 1]);
    else return fail("usage", "launch_bench --db DB [--calls N] [--repeats R] [--tokens T]");
  }
  if (db.empty()) return fail("usage", "launch_bench --db DB [--calls N] [--repeats R] [--tokens T]");
  char error[2048] = "";
  mxc_client* client = mxc_connect(("sqlite://" + db).c_str(), nullptr, 0, error, sizeof error);
  if (!client) return fail("connect", error);
  mxrt_device* device = nullptr;
  if (mxrt_device_open("auto", nullptr, 0, &device) != MXRT_SUCCESS) return fail("device", mxrt_last_error());

  const int64_t T = tokens, D = 3072, B = 1;
  struct Buffer {
    const char* name;
    mxrt_dtype dtype;
    int64_t rows, cols;
    void* data = nullptr;
  };
  std::vector<Buffer> buffers = {{"x", MXRT_DTYPE_BF16, T, D}, {"scale", MXRT_DTYPE_BF16, B, D}, {"shift", MXRT_DTYPE_BF16, B, D},
                                 {"y", MXRT_DTYPE_BF16, T, D}, {"mean", MXRT_DTYPE_F32, T, 0},   {"rstd", MXRT_DTYPE_F32, T, 0}};
  std::vector<mxc_named_tensor> tensors;
  for (Buffer& b : buffers) {
    size_t bytes = size_t(b.rows) * size_t(b.cols ? b.cols : 1) * (b.dtype == MXRT_DTYPE_F32 ? 4 : 2);
    if (mxrt_malloc(device, bytes, &b.data) != MXRT_SUCCESS || mxrt_memset(device, b.data, 0, bytes) != MXRT_SUCCESS)
      return fail("allocate", mxrt_last_error());
    tensors.push_back({b.name, tensor2d(b.data, b.dtype, b.rows, b.cols)});
  }
  std::vector<mxc_named_scalar> scalars = {{"tokens_per_sample", double(T / B)}, {"eps", 1e-6}};

  char key[512];
  if (!mxc_call_key("ln_modulate_fwd", "layout=bsd", "sm_90", tensors.data(), tensors.size(), scalars.data(),
                    scalars.size(), key, sizeof key, error, sizeof error))
    return fail("key", error);
  const char* keys[] = {key};
  mxc_resolution* resolution = mxc_resolve(client, keys, 1, error, sizeof error);
  if (!resolution) return fail("resolve", error);
  mxc_op* op = mxc_op_create(resolution, 0, error, sizeof error);
  if (!op) return fail("op", error);
  if (mxc_op_load(op, device, error, sizeof error) != MXRT_SUCCESS) return fail("load", error);

  auto launch = [&]() {
    return mxc_op_launch(op, nullptr, tensors.data(), tensors.size(), scalars.data(), scalars.size(), nullptr,
                         nullptr, error, sizeof error);
  };
  auto checkedInFull = [&]() {
    mxc_launches* l = mxc_op_prepare(op, tensors.data(), tensors.size(), scalars.data(), scalars.size(), nullptr,
                                     nullptr, error, sizeof error);
    if (l == nullptr) return int(MXRT_ERROR_INVALID_ARGUMENT);
    int status = mxc_launches_enqueue(l, nullptr, 0, mxc_launches_count(l), error, sizeof error);
    mxc_launches_free(l);
    return status;
  };
  // The best of `repeats` loops of `calls` back-to-back calls, the queue drained between loops.
  auto bestUsPerCall = [&](auto&& call) {
    for (int i = 0; i < 100; ++i)
      if (call() != MXRT_SUCCESS) return -1.0;
    double best = 1e30;
    for (long r = 0; r < repeats; ++r) {
      mxrt_synchronize(device, nullptr);
      auto t0 = Clock::now();
      for (long i = 0; i < calls; ++i)
        if (call() != MXRT_SUCCESS) return -1.0;
      best = std::min(best, std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / double(calls));
    }
    mxrt_synchronize(device, nullptr);
    return best;
  };
  double bestUs = bestUsPerCall(launch);
  if (bestUs < 0) return fail("launch", error);
  double checkedUs = bestUsPerCall(checkedInFull);
  if (checkedUs < 0) return fail("prepare and enqueue", error);
  std::printf("{\"op\": \"%s\", \"plan\": \"%s\", \"calls\": %ld, \"repeats\": %ld, \"host_us_per_launch\": %.3f, "
              "\"host_us_per_launch_checked_in_full\": %.3f, \"signatures\": %zu, \"device\": \"%s\"}\n",
              key, mxc_op_plan(op), calls, repeats, bestUs, checkedUs, mxc_op_signatures(op), mxrt_device_name(device));
  mxc_op_free(op);
  mxc_resolution_free(resolution);
  for (Buffer& b : buffers) mxrt_free(device, b.data);
  mxrt_device_close(device);
  mxc_close(client);
  return 0;
}
