// Pipeline statistics, the bottleneck report, the Perfetto trace and the SVG timeline.

#include <gmock/gmock.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "actors/trace_export.hpp"
#include "pipeline_fixture.hpp"

using namespace troupe;
using namespace troupe::test;
using ::testing::HasSubstr;

namespace {
void run_requests(CompiledModel& compiled, int n) {
  std::vector<InferRequest> requests;
  for (int i = 0; i < n; ++i) {
    requests.push_back(compiled.create_infer_request());
    requests.back().set_tensor("x", make_input(static_cast<float>(i)));
    requests.back().start_async();
  }
  for (auto& r : requests) r.wait();
}
}  // namespace

TEST(Profiling, BottleneckReportNamesTheSlowStage) {
  for (detail::Stage slow : {detail::Stage::download, detail::Stage::preprocess}) {
    Core core;
    auto compiled = core.compile_model(make_add_relu_model(), "CPU", {{props::num_streams, 2}});
    set_stage_hook(compiled, [slow](detail::Stage stage, uint64_t) {
      if (stage == slow) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
    run_requests(compiled, 24);
    auto summary = compiled.impl()->context().stats.summary();
    const size_t index = static_cast<size_t>(slow);
    EXPECT_THAT(summary.bottleneck, HasSubstr(std::string("'") + stage_names[index] + "'"));
    EXPECT_GT(summary.stages[index].occupancy, 0.5);
    EXPECT_EQ(summary.stages[index].count, 24u);
    EXPECT_GE(summary.stages[index].p50_us, 4000);
    EXPECT_THAT(compiled.stats_report(), HasSubstr("bottleneck"));
  }
}

TEST(Profiling, QueueWaitIsMeasuredBeforeTheSlowStage) {
  Core core;
  auto compiled =
      core.compile_model(make_add_relu_model(), "CPU", {{props::max_requests_in_flight, 16}});
  set_stage_hook(compiled, [](detail::Stage stage, uint64_t) {
    if (stage == detail::Stage::upload) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  });
  run_requests(compiled, 16);
  auto summary = compiled.impl()->context().stats.summary();
  // Requests pile up in front of upload: each waits for the ones ahead of it.
  EXPECT_GT(summary.stages[1].queue_wait_mean_us, 5000);
  EXPECT_LT(summary.stages[3].queue_wait_mean_us, summary.stages[1].queue_wait_mean_us);
}

TEST(Profiling, PerfettoTraceHasOrderedSpansFlowsAndOps) {
  Core core;
  auto compiled = core.compile_model(make_add_relu_model(), "CPU",
                                     {{props::num_streams, 2}, {props::enable_profiling, true}});
  constexpr int n = 20;
  run_requests(compiled, n);
  auto& ctx = compiled.impl()->context();
  std::vector<std::string> ops;
  for (const auto& node : ctx.graph->model->nodes()) ops.push_back(node.name);
  auto doc = nlohmann::json::parse(detail::chrome_trace_json(ctx.stats.traces(), 2, ops));
  ASSERT_TRUE(doc.contains("traceEvents"));
  std::map<uint64_t, std::vector<std::pair<double, double>>> stage_spans;  // request -> spans
  std::map<uint64_t, int> begins, ends, flow_starts, flow_ends;
  std::set<std::string> track_names;
  int op_spans = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") track_names.insert(e["args"]["name"]);
    if (ph == "X" && e["cat"] == "stage")
      stage_spans[e["args"]["request"]].push_back(
          {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
    if (ph == "X" && e["cat"] == "op") ++op_spans;
    if (ph == "b") ++begins[e["id"]];
    if (ph == "e") ++ends[e["id"]];
    if (ph == "s") ++flow_starts[e["id"]];
    if (ph == "f") ++flow_ends[e["id"]];
  }
  EXPECT_EQ(track_names.size(), 6u);  // 4 single stages + 2 execute streams
  ASSERT_EQ(stage_spans.size(), static_cast<size_t>(n));
  for (const auto& [id, spans] : stage_spans) {
    ASSERT_EQ(spans.size(), 5u) << id;
    for (size_t i = 1; i < spans.size(); ++i)
      EXPECT_LE(spans[i - 1].second, spans[i].first + 1e-3) << "request " << id << " stage " << i;
    EXPECT_EQ(begins[id], 6);  // the request + its 5 stages
    EXPECT_EQ(ends[id], 6);
    EXPECT_EQ(flow_starts[id], 1);
    EXPECT_EQ(flow_ends[id], 1);
  }
  EXPECT_EQ(op_spans, n * 2);  // Add and Relu per request

  auto runtime = compiled.runtime_model();
  for (const auto& node : runtime->nodes()) {
    EXPECT_EQ(node.attributes.get_int("runs"), n) << node.name;
    EXPECT_GE(node.attributes.get_float("mean_real_time_us"), 0.0);
  }

  const std::string svg = detail::timeline_svg(ctx.stats.traces(), 2);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr(stage_names[0]));
  size_t bars = 0;
  for (size_t pos = 0; (pos = svg.find("<title>request", pos)) != std::string::npos; ++pos) ++bars;
  EXPECT_EQ(bars, static_cast<size_t>(n * 5));
}
