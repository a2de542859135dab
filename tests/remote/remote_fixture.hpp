#pragma once

// Helpers of the remote tests: networked Cores in one process (each its own actor system and
// middleman, talking over loopback TCP like separate nodes), a model with known outputs, and
// requests kept in flight.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "../actors/pipeline_fixture.hpp"
#include "troupe/actor_interface.hpp"
#include "troupe/core.hpp"
#include "troupe/remote.hpp"

namespace troupe::test {

/// A node serving add_relu ([1,16] f32, y = relu(x + 0.5)) as "add_relu" on a loopback port.
struct ServingNode {
  explicit ServingNode(NodeOptions options = {}, uint16_t port = 0,
                       const AnyMap& properties = {{props::num_streams, 2}})
      : core(options) {
    model = core.compile_model(make_add_relu_model(), "CPU", properties);
    this->port = core.publish({{"add_relu", model}}, port);
  }
  Core core;
  CompiledModel model;
  uint16_t port = 0;
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port); }
};

/// Runs `count` requests through `model`, `window` in flight at once from `threads` threads;
/// checks every output and returns how many failed (their messages in `errors`).
inline int run_checked(CompiledModel& model, int count, int window, int threads,
                       std::vector<std::string>* errors = nullptr) {
  std::atomic<int> next{0}, failed{0};
  std::mutex mutex;
  auto worker = [&] {
    std::vector<InferRequest> requests;
    std::vector<float> bases;
    for (int w = 0; w < window; ++w) requests.push_back(model.create_infer_request());
    bases.resize(requests.size());
    bool more = true;
    while (more) {
      size_t started = 0;
      for (size_t r = 0; r < requests.size(); ++r) {
        const int i = next++;
        if (i >= count) {
          more = false;
          break;
        }
        bases[r] = static_cast<float>(i % 97);
        requests[r].set_tensor("x", make_input(bases[r]));
        requests[r].start_async();
        ++started;
      }
      for (size_t r = 0; r < started; ++r) {
        try {
          requests[r].wait();
          Tensor in = make_input(bases[r]);
          auto x = in.to_vector<float>();
          auto y = requests[r].get_tensor("y").to_vector<float>();
          for (size_t k = 0; k < x.size(); ++k)
            if (y[k] != expected_add_relu(x[k])) throw std::runtime_error("wrong output");
        } catch (const std::exception& e) {
          ++failed;
          std::lock_guard<std::mutex> lock(mutex);
          if (errors) errors->push_back(e.what());
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return failed;
}

}  // namespace troupe::test
