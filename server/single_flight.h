// Single-flight: concurrent callers asking for the same key share one execution of the work, and
// every one of them gets its result. The work runs on its own thread, so a caller whose deadline
// passes can give up waiting without cancelling it for the others (a compile cannot be stopped
// half-way; its result is stored for the next request).
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

namespace mxfp6::server {

template <typename Key, typename Value>
class SingleFlight {
 public:
  /// The result of `work` for `key`, started now unless already in flight (`*started` says
  /// which). The caller waits on the future, as long as its deadline allows.
  std::shared_future<Value> run(const Key& key, std::function<Value()> work, bool* started = nullptr) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (auto it = inFlight_.find(key); it != inFlight_.end()) {
      if (started) *started = false;
      return it->second;
    }
    auto promise = std::make_shared<std::promise<Value>>();
    std::shared_future<Value> future = promise->get_future().share();
    inFlight_.emplace(key, future);
    if (started) *started = true;
    std::thread([this, key, work = std::move(work), promise] {
      Value value = work();
      {
        // Leave the map before publishing: a caller that sees the result and asks again finds
        // the stored answer, not a finished flight.
        std::lock_guard<std::mutex> lock(mutex_);
        inFlight_.erase(key);
      }
      promise->set_value(std::move(value));
    }).detach();
    return future;
  }

  size_t inFlight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return inFlight_.size();
  }

  /// Waits until nothing is in flight or `deadline` passes; whether it is idle. Before the
  /// owner is destroyed: the work's threads refer to it.
  bool waitIdle(std::chrono::steady_clock::time_point deadline) const {
    while (inFlight() > 0) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

 private:
  mutable std::mutex mutex_;
  std::map<Key, std::shared_future<Value>> inFlight_;
};

}  // namespace mxfp6::server
