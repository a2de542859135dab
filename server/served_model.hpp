#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "troupe/actor_protocol.hpp"
#include "troupe/compiled_model.hpp"

namespace troupe::server {

/// Server-side counters of one model version, kept from decode to reply (the pipeline's own
/// counters are CompiledModel::counters()).
struct RequestCounters {
  std::atomic<uint64_t> success{0};
  std::atomic<uint64_t> success_ns{0};
  std::atomic<uint64_t> failure{0};
  std::atomic<uint64_t> failure_ns{0};
  std::atomic<uint64_t> inference_count{0};  // batch items inferred (the leading dimension summed)
  std::array<std::atomic<uint64_t>, 4> failures_by_reason{};  // indexed by ServeErrc
  std::atomic<uint64_t> last_inference_ms{0};                 // Unix time of the last success
};

/// One loaded version of a model: its compiled model, its actor and the requests in flight.
class ServedModel {
 public:
  ServedModel(std::string name, std::string version, std::string platform, CompiledModel compiled);
  ~ServedModel();

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  /// "troupe_onnx", "troupe_model" or "troupe_blob": the format the model was loaded from.
  const std::string& platform() const { return platform_; }
  const CompiledModel& compiled() const { return compiled_; }
  const model_actor& actor() const { return actor_; }
  const std::vector<ValueInfo>& inputs() const { return compiled_.inputs(); }
  const std::vector<ValueInfo>& outputs() const { return compiled_.outputs(); }
  RequestCounters& counters() { return counters_; }

  /// A request admitted to this model; the model is not unloaded while one exists.
  class Ticket {
   public:
    explicit Ticket(std::shared_ptr<ServedModel> model) : model_(std::move(model)) {}
    Ticket(Ticket&&) = default;
    Ticket& operator=(Ticket&&) = default;
    ~Ticket();
    ServedModel& model() const { return *model_; }
    const std::shared_ptr<ServedModel>& shared() const { return model_; }

   private:
    std::shared_ptr<ServedModel> model_;
  };

  /// Admits a request; throws ServeError(unavailable) once the model is draining.
  static Ticket admit(const std::shared_ptr<ServedModel>& model);

  /// Stops admitting requests and waits until every admitted one has been answered.
  void drain();
  /// Requests admitted and not yet answered.
  int64_t pending() const { return pending_.load(); }

 private:
  void leave();

  std::string name_, version_, platform_;
  CompiledModel compiled_;
  model_actor actor_;
  RequestCounters counters_;
  std::atomic<int64_t> pending_{0};
  mutable std::mutex mutex_;
  std::condition_variable drained_;
  bool draining_ = false;  // guarded by mutex_
};

}  // namespace troupe::server
