#include "apps/bench_command.hpp"

#include <exception>
#include <iostream>
#include <vector>

#include "apps/bench_exec_graph.hpp"
#include "apps/bench_model.hpp"
#include "apps/bench_op_counters.hpp"
#include "apps/bench_report_console.hpp"
#include "apps/bench_report_json.hpp"
#include "apps/bench_runner.hpp"
#include "apps/bench_statistics.hpp"
#include "apps/bench_trace.hpp"
#include "apps/bench_workload.hpp"
#include "troupe/core.hpp"

namespace troupe::apps {

namespace {

int bench(const BenchOptions& o) {
  Core core = make_bench_core(o);
  BenchModel model = load_bench_model(core, o);
  Workload workload = make_workload(model, o);
  print_config(o, model, workload);

  // Reported on its own: it pays one-time costs (buffers, kernel set-up).
  const double first_ms = time_first_inference(workload.requests[0]);
  print_first_inference(first_ms);

  const Measurement measurement = run_measured_phase(model.compiled, workload.requests, o);
  const RunResults results = summarize_run(first_ms, measurement, workload.batch, model.compiled);
  print_results(results, model);

  std::vector<OpCounter> ops;
  if (o.perf_counts && !model.remote) {  // a remote model's ops run, and are counted, on its node
    ops = op_counters(model.compiled, o.pc_sort);
    print_op_counters(ops, o.pc_sort);
  }
  if (!o.exec_graph_path.empty() && model.remote)
    std::cerr << "troupe bench: -exec_graph_path: the model is remote; its graph is on its node\n";
  else if (!o.exec_graph_path.empty())
    write_exec_graph(o.exec_graph_path, model.compiled);
  if (!o.trace_path.empty()) write_chrome_trace(o.trace_path, model.compiled);
  if (!o.timeline_path.empty()) write_timeline(o.timeline_path, model.compiled);
  if (!o.report.empty()) write_json_report(o.report[1], o, model, workload, results, ops);

  if (results.first_error) {
    std::cerr << "troupe bench: error: " << results.failed
              << " request(s) failed; first error: " << error_text(results.first_error) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

int run_bench(const BenchOptions& options) {
  try {
    return bench(options);
  } catch (const std::exception& e) {
    std::cerr << "troupe bench: error: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace troupe::apps
