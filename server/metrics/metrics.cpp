#include "server/metrics/metrics.hpp"

#include <prometheus/client_metric.h>
#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/metric_family.h>
#include <prometheus/metric_type.h>

#include "server/serve_error.hpp"

namespace troupe::server {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

class ModelCollector : public prometheus::Collectable {
 public:
  explicit ModelCollector(ModelRepository& repository) : repository_(repository) {}

  std::vector<MetricFamily> Collect() const override {
    std::vector<MetricFamily> families;
    families.reserve(16);  // the references handed out below must stay valid
    auto family = [&](const char* name, const char* help, MetricType type) -> MetricFamily& {
      families.push_back(MetricFamily{name, help, type, {}});
      return families.back();
    };
    MetricFamily& success = family("troupe_inference_request_success",
                                   "Successful inference requests", MetricType::Counter);
    MetricFamily& failure = family("troupe_inference_request_failure",
                                   "Failed inference requests, by reason", MetricType::Counter);
    MetricFamily& count =
        family("troupe_inference_count", "Inferences performed (batch items)", MetricType::Counter);
    MetricFamily& exec =
        family("troupe_inference_exec_count", "Model executions (a merged batch counts once)",
               MetricType::Counter);
    MetricFamily& request_us =
        family("troupe_inference_request_duration_us",
               "Cumulative request duration, decode to reply", MetricType::Counter);
    MetricFamily& queue_us =
        family("troupe_inference_queue_duration_us",
               "Cumulative time requests waited between pipeline stages", MetricType::Counter);
    MetricFamily& input_us = family("troupe_inference_compute_input_duration_us",
                                    "Cumulative preprocess + upload time", MetricType::Counter);
    MetricFamily& infer_us = family("troupe_inference_compute_infer_duration_us",
                                    "Cumulative execute time", MetricType::Counter);
    MetricFamily& output_us = family("troupe_inference_compute_output_duration_us",
                                     "Cumulative download + postprocess time", MetricType::Counter);
    MetricFamily& pending = family("troupe_inference_pending_request_count",
                                   "Requests admitted and not yet answered", MetricType::Gauge);
    MetricFamily& busy = family("troupe_pipeline_stage_busy_us",
                                "Cumulative busy time of each pipeline stage", MetricType::Counter);

    for (const auto& model : repository_.loaded()) {
      const std::vector<ClientMetric::Label> labels = {{"model", model->name()},
                                                       {"version", model->version()}};
      auto add = [&](MetricFamily& f, double value, std::vector<ClientMetric::Label> extra = {}) {
        ClientMetric m;
        m.label = labels;
        m.label.insert(m.label.end(), extra.begin(), extra.end());
        if (f.type == MetricType::Gauge)
          m.gauge.value = value;
        else
          m.counter.value = value;
        f.metric.push_back(std::move(m));
      };
      RequestCounters& c = model->counters();
      const PipelineCounters p = model->compiled().counters();
      uint64_t executions = 0;
      for (const auto& [size, b] : p.batches) executions += b.executions;
      uint64_t queue_ns = 0;
      for (const auto& s : p.stages) queue_ns += s.queue_ns;
      add(success, static_cast<double>(c.success.load()));
      for (ServeErrc reason : {ServeErrc::bad_request, ServeErrc::not_found, ServeErrc::unavailable,
                               ServeErrc::internal})
        add(failure, static_cast<double>(c.failures_by_reason[static_cast<size_t>(reason)].load()),
            {{"reason", reason_label(reason)}});
      add(count, static_cast<double>(c.inference_count.load()));
      add(exec, static_cast<double>(executions));
      add(request_us, static_cast<double>(c.success_ns.load() + c.failure_ns.load()) / 1e3);
      add(queue_us, static_cast<double>(queue_ns) / 1e3);
      add(input_us, static_cast<double>(p.stages[0].busy_ns + p.stages[1].busy_ns) / 1e3);
      add(infer_us, static_cast<double>(p.stages[2].busy_ns) / 1e3);
      add(output_us, static_cast<double>(p.stages[3].busy_ns + p.stages[4].busy_ns) / 1e3);
      add(pending, static_cast<double>(model->pending()));
      for (size_t i = 0; i < p.stages.size(); ++i)
        add(busy, static_cast<double>(p.stages[i].busy_ns) / 1e3,
            {{"stage", PipelineCounters::stage_names[i]}});
    }
    return families;
  }

 private:
  ModelRepository& repository_;
};

}  // namespace

struct Metrics::Impl {
  std::unique_ptr<prometheus::Exposer> exposer;
  std::shared_ptr<ModelCollector> collector;
};

Metrics::Metrics(ModelRepository& repository, const std::string& host, int port)
    : impl_(std::make_unique<Impl>()) {
  impl_->collector = std::make_shared<ModelCollector>(repository);
  try {
    impl_->exposer = std::make_unique<prometheus::Exposer>(host + ":" + std::to_string(port), 2);
  } catch (const std::exception& e) {
    throw ServeError(ServeErrc::unavailable, "metrics: cannot listen on " + host + ":" +
                                                 std::to_string(port) + ": " + e.what());
  }
  impl_->exposer->RegisterCollectable(impl_->collector, "/metrics");
}

Metrics::~Metrics() = default;

int Metrics::port() const {
  auto ports = impl_->exposer->GetListeningPorts();
  return ports.empty() ? 0 : ports.front();
}

}  // namespace troupe::server
