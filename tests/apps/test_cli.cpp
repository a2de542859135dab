// The `troupe` command line, run as a user runs it: exit codes, messages and the JSON report.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "apps/default_model.hpp"
#include "serialization/npy_format.hpp"
#include "troupe/model_builder.hpp"
#include "troupe/profiling_info.hpp"
#include "troupe/serialize.hpp"

namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

struct RunResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "troupe_cli_" + std::to_string(::getpid()) + "_" + name;
}

RunResult run_troupe(const std::string& args) {
  const std::string out_file = temp_path("output.txt");
  const std::string cmd =
      std::string(TROUPE_BINARY_DIR) + "/bin/troupe " + args + " > '" + out_file + "' 2>&1";
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(out_file);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  std::remove(out_file.c_str());
  return r;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "no report at " << path;
  json j = json::parse(in);
  std::remove(path.c_str());
  return j;
}

void expect_sane_latency(const json& lat) {
  for (const char* key : {"median", "average", "min", "max", "p90", "p99"}) {
    ASSERT_TRUE(lat.contains(key)) << key;
    EXPECT_GT(lat[key].get<double>(), 0.0) << key;
  }
  EXPECT_LE(lat["min"].get<double>(), lat["median"].get<double>());
  EXPECT_LE(lat["median"].get<double>(), lat["p90"].get<double>());
  EXPECT_LE(lat["p90"].get<double>(), lat["p99"].get<double>());
  EXPECT_LE(lat["p99"].get<double>(), lat["max"].get<double>());
  EXPECT_LE(lat["min"].get<double>(), lat["average"].get<double>());
  EXPECT_LE(lat["average"].get<double>(), lat["max"].get<double>());
}

TEST(Cli, BenchWritesACompleteJsonReport) {
  const std::string report = temp_path("report.json");
  RunResult r = run_troupe("bench -niter 50 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The printed figures.
  EXPECT_THAT(r.output, HasSubstr("throughput"));
  EXPECT_THAT(r.output, HasSubstr("latency p99"));
  EXPECT_THAT(r.output, HasSubstr("mean requests in flight"));
  EXPECT_THAT(r.output, HasSubstr("stage overlap"));
  EXPECT_THAT(r.output, HasSubstr("bottleneck"));
  for (const char* stage : troupe::stage_names) EXPECT_THAT(r.output, HasSubstr(stage));

  const json j = read_json(report);
  const json& config = j.at("config");
  EXPECT_EQ(config.at("model").get<std::string>(), "troupe_default_cnn");
  EXPECT_TRUE(config.at("embedded_model").get<bool>());
  EXPECT_EQ(config.at("performance_hint").get<std::string>(), "THROUGHPUT");
  EXPECT_EQ(config.at("iteration_limit").get<int>(), 50);
  EXPECT_TRUE(config.at("time_limit_s").is_null());
  EXPECT_GE(config.at("num_streams").get<int>(), 1);
  EXPECT_GE(config.at("inference_num_threads").get<int>(), 1);
  // Without -nireq the compiled model's optimum is used.
  EXPECT_EQ(config.at("nireq").get<int>(),
            config.at("optimal_number_of_infer_requests").get<int>());
  EXPECT_EQ(config.at("inputs")[0].at("name").get<std::string>(), "image");
  EXPECT_EQ(config.at("inputs")[0].at("shape"), json({1, 3, 32, 32}));
  EXPECT_EQ(config.at("outputs")[0].at("name").get<std::string>(), "probabilities");
  EXPECT_EQ(config.at("outputs")[0].at("shape"), json({1, 10}));

  EXPECT_GT(j.at("first_inference_ms").get<double>(), 0.0);
  const json& results = j.at("results");
  EXPECT_EQ(results.at("count").get<int>(), 50);
  EXPECT_EQ(results.at("failed").get<int>(), 0);
  EXPECT_GT(results.at("duration_s").get<double>(), 0.0);
  // 50 requests over the measured duration.
  EXPECT_NEAR(results.at("throughput_fps").get<double>(),
              50.0 / results.at("duration_s").get<double>(), 1e-6);
  expect_sane_latency(results.at("latency_ms"));
  // The process's peak resident set, in bytes: more than the ~10 MB the binary's code alone
  // maps, far less than the machine.
  EXPECT_GT(results.at("peak_rss_bytes").get<int64_t>(), int64_t{10} << 20);
  EXPECT_LT(results.at("peak_rss_bytes").get<int64_t>(), int64_t{8} << 30);
  EXPECT_GT(results.at("rss_bytes").get<int64_t>(), int64_t{10} << 20);
  EXPECT_LE(results.at("rss_bytes").get<int64_t>(), results.at("peak_rss_bytes").get<int64_t>());

  // The pipeline counters cover exactly the 50 measured requests (the first inference is not
  // counted) and every stage saw each of them.
  const json& pipeline = j.at("pipeline");
  EXPECT_EQ(pipeline.at("requests").get<int>(), 50);
  EXPECT_EQ(pipeline.at("failed").get<int>(), 0);
  EXPECT_GT(pipeline.at("wall_ms").get<double>(), 0.0);
  EXPECT_GT(pipeline.at("mean_requests_in_flight").get<double>(), 0.0);
  EXPECT_LE(pipeline.at("mean_requests_in_flight").get<double>(),
            config.at("nireq").get<double>() + 1e-9);
  EXPECT_GT(pipeline.at("stage_overlap").get<double>(), 0.0);
  EXPECT_THAT(pipeline.at("bottleneck").get<std::string>(), HasSubstr("bottleneck"));
  const json& stages = pipeline.at("stages");
  ASSERT_EQ(stages.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(stages[i].at("name").get<std::string>(), troupe::stage_names[i]);
    EXPECT_EQ(stages[i].at("count").get<int>(), 50);
    EXPECT_GE(stages[i].at("mean_us").get<double>(), 0.0);
    EXPECT_LE(stages[i].at("p50_us").get<double>(), stages[i].at("p99_us").get<double>());
    EXPECT_LE(stages[i].at("p99_us").get<double>(), stages[i].at("max_us").get<double>());
    EXPECT_GE(stages[i].at("occupancy").get<double>(), 0.0);
    EXPECT_LE(stages[i].at("occupancy").get<double>(), 1.0 + 1e-9);
  }
  EXPECT_EQ(stages[2].at("workers").get<int>(), config.at("num_streams").get<int>());
  EXPECT_GT(stages[2].at("mean_us").get<double>(), 0.0);  // the CNN takes real time
  EXPECT_FALSE(j.contains("per_op"));
}

TEST(Cli, LatencyHintWithOneRequestAndPerOpCounters) {
  const std::string report = temp_path("latency.json");
  RunResult r =
      run_troupe("bench --hint latency --nireq 1 --niter 20 --pc --report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("per-op counters"));
  const json j = read_json(report);
  EXPECT_EQ(j.at("config").at("performance_hint").get<std::string>(), "LATENCY");
  EXPECT_EQ(j.at("config").at("num_streams").get<int>(), 1);
  EXPECT_EQ(j.at("config").at("nireq").get<int>(), 1);
  EXPECT_TRUE(j.at("config").at("perf_count").get<bool>());
  EXPECT_EQ(j.at("results").at("count").get<int>(), 20);
  // One request at a time: never more than one in flight.
  EXPECT_LE(j.at("pipeline").at("mean_requests_in_flight").get<double>(), 1.0 + 1e-9);
  const json& ops = j.at("per_op");
  ASSERT_FALSE(ops.empty());
  bool saw_conv = false;
  for (const auto& op : ops) {
    EXPECT_EQ(op.at("runs").get<int>(), 20) << op.dump();
    EXPECT_GE(op.at("mean_real_us").get<double>(), 0.0);
    if (op.at("type").get<std::string>() == "Conv") saw_conv = true;
  }
  EXPECT_TRUE(saw_conv);
}

TEST(Cli, TraceAndTimelineFiles) {
  const std::string trace = temp_path("trace.json");
  const std::string timeline = temp_path("timeline.svg");
  RunResult r = run_troupe("bench -niter 30 -nireq 4 -pc -trace '" + trace + "' -timeline '" +
                           timeline + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = read_json(trace);
  int stage_slices = 0, op_slices = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("cat") == "stage") ++stage_slices;
    if (e.at("ph") == "X" && e.at("cat") == "op") ++op_slices;
  }
  // 30 timed runs plus the separately reported first inference, five stages each.
  EXPECT_GE(stage_slices, 30 * 5);
  EXPECT_GT(op_slices, 0);
  std::ifstream in(timeline);
  std::stringstream svg;
  svg << in.rdbuf();
  EXPECT_THAT(svg.str(), HasSubstr("<svg"));
  EXPECT_THAT(svg.str(), HasSubstr("3. execution time"));
  std::remove(timeline.c_str());
}

TEST(Cli, StreamsAndThreadsReachTheCompiledModel) {
  const std::string report = temp_path("streams.json");
  RunResult r =
      run_troupe("bench -nstreams 2 -nthreads 2 -nireq 3 -niter 30 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = read_json(report);
  EXPECT_EQ(j.at("config").at("num_streams").get<int>(), 2);
  EXPECT_EQ(j.at("config").at("inference_num_threads").get<int>(), 2);
  EXPECT_EQ(j.at("config").at("nireq").get<int>(), 3);
  EXPECT_EQ(j.at("results").at("count").get<int>(), 30);
  EXPECT_EQ(j.at("pipeline").at("stages")[2].at("workers").get<int>(), 2);
}

TEST(Cli, TimeLimitStopsTheRun) {
  const std::string report = temp_path("time.json");
  RunResult r = run_troupe("bench -t 0.3 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = read_json(report);
  EXPECT_DOUBLE_EQ(j.at("config").at("time_limit_s").get<double>(), 0.3);
  EXPECT_TRUE(j.at("config").at("iteration_limit").is_null());
  EXPECT_GT(j.at("results").at("count").get<int>(), 0);
  EXPECT_GE(j.at("results").at("duration_s").get<double>(), 0.3);
}

std::vector<double> mean_real_times(const json& per_op) {
  std::vector<double> t;
  for (const auto& op : per_op) t.push_back(op.at("mean_real_us").get<double>());
  return t;
}

TEST(Cli, PcSortOrdersThePerOpCounters) {
  // 'sort': every op, slowest first; -pcsort alone turns the counters on.
  const std::string sorted_report = temp_path("pcsort.json");
  RunResult r = run_troupe("bench -hint latency -nireq 1 -niter 10 -pcsort sort -report json '" +
                           sorted_report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("per-op counters ] (averaged over runs; sort)"));
  const json sorted = read_json(sorted_report);
  EXPECT_TRUE(sorted.at("config").at("perf_count").get<bool>());
  EXPECT_EQ(sorted.at("config").at("pc_sort").get<std::string>(), "sort");
  const std::vector<double> times = mean_real_times(sorted.at("per_op"));
  ASSERT_FALSE(times.empty());
  EXPECT_TRUE(std::is_sorted(times.rbegin(), times.rend()));

  // 'no_sort': execution order, the order of the execution graph.
  const std::string plain_report = temp_path("nosort.json");
  const std::string graph = temp_path("nosort_graph.json");
  r = run_troupe("bench -hint latency -nireq 1 -niter 10 -pc -pcsort no_sort -exec_graph_path '" +
                 graph + "' -report json '" + plain_report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json plain = read_json(plain_report);
  const json exec_graph = read_json(graph);
  ASSERT_EQ(plain.at("per_op").size(), exec_graph.at("nodes").size());
  EXPECT_EQ(plain.at("per_op").size(), times.size());
  for (size_t i = 0; i < plain.at("per_op").size(); ++i)
    EXPECT_EQ(plain.at("per_op")[i].at("name"), exec_graph.at("nodes")[i].at("name")) << i;

  // 'simple_sort': sorted, and ops that took no time are left out.
  const std::string simple_report = temp_path("simplesort.json");
  r = run_troupe("bench -hint latency -nireq 1 -niter 10 -pc -pcsort simple_sort -report json '" +
                 simple_report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> simple = mean_real_times(read_json(simple_report).at("per_op"));
  ASSERT_FALSE(simple.empty());
  EXPECT_TRUE(std::is_sorted(simple.rbegin(), simple.rend()));
  for (double t : simple) EXPECT_GT(t, 0.0);
  EXPECT_LE(simple.size(), times.size());
}

TEST(Cli, ExecGraphPathWritesTheRuntimeModel) {
  const std::string graph = temp_path("exec_graph.json");
  RunResult r = run_troupe("bench -niter 5 -exec_graph_path '" + graph + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("execution graph written to"));
  const json j = read_json(graph);
  EXPECT_EQ(j.at("model").get<std::string>(), "troupe_default_cnn");
  const json& nodes = j.at("nodes");
  ASSERT_FALSE(nodes.empty());
  bool saw_conv = false, saw_image = false, saw_probabilities = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& n = nodes[i];
    EXPECT_EQ(n.at("execution_order").get<int64_t>(), static_cast<int64_t>(i));
    EXPECT_FALSE(n.at("name").get<std::string>().empty());
    EXPECT_FALSE(n.at("implementation").get<std::string>().empty()) << n.dump();
    EXPECT_TRUE(n.at("original_names").is_array());
    EXPECT_FALSE(n.at("outputs").empty());
    if (n.at("layer_type") == "Conv") saw_conv = true;
    for (const auto& v : n.at("inputs"))
      if (v.at("name") == "image") {
        saw_image = true;
        EXPECT_EQ(v.at("shape"), json({1, 3, 32, 32}));
        EXPECT_EQ(v.at("type"), "f32");
      }
    for (const auto& v : n.at("outputs"))
      if (v.at("name") == "probabilities") {
        saw_probabilities = true;
        EXPECT_EQ(v.at("shape"), json({1, 10}));
      }
  }
  EXPECT_TRUE(saw_conv);
  EXPECT_TRUE(saw_image);
  EXPECT_TRUE(saw_probabilities);
}

TEST(Cli, ExecGraphPathShowsAnOmittedOptionalInputAsNull) {
  // Resize without roi (input 1 named ''), as torch exports every upsampling.
  const std::string model = temp_path("resize_no_roi.onnx");
  const std::string script_path = temp_path("make_resize.py");
  std::ofstream(script_path)
      << "import onnx\n"
         "from onnx import helper, TensorProto\n"
         "x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, 2, 4, 4])\n"
         "y = helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, 2, 8, 8])\n"
         "scales = helper.make_tensor('scales', TensorProto.FLOAT, [4], [1, 1, 2, 2])\n"
         "node = helper.make_node('Resize', ['x', '', 'scales'], ['y'], name='up', "
         "mode='nearest')\n"
         "g = helper.make_graph([node], 'up', [x], [y], [scales])\n"
         "onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), '"
      << model << "')\n";
  const int status =
      std::system(("/usr/bin/python3 '" + script_path + "' > /dev/null 2>&1").c_str());
  std::remove(script_path.c_str());
  if (status != 0) GTEST_SKIP() << "cannot write an ONNX model with /usr/bin/python3";
  const std::string graph = temp_path("resize_graph.json");
  RunResult r = run_troupe("bench -m '" + model + "' -niter 3 -exec_graph_path '" + graph + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = read_json(graph);
  bool saw_resize = false;
  for (const json& n : j.at("nodes"))
    if (n.at("layer_type") == "Resize") {
      saw_resize = true;
      ASSERT_GE(n.at("inputs").size(), 2u) << n.dump();
      EXPECT_EQ(n.at("inputs")[0].at("name"), "x");
      EXPECT_TRUE(n.at("inputs")[1].is_null()) << n.dump();
    }
  EXPECT_TRUE(saw_resize) << j.dump();
}

TEST(Cli, InferPrecisionReachesTheCompiledModel) {
  const std::string report = temp_path("precision.json");
  RunResult r = run_troupe("bench -niter 5 -infer_precision f32 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_json(report).at("config").at("inference_precision").get<std::string>(), "f32");
  // bf16 is honoured where the CPU has it and falls back to f32 elsewhere; the run works either
  // way.
  r = run_troupe("bench -niter 5 -infer_precision bf16 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(read_json(report).at("config").at("inference_precision").get<std::string>(),
              ::testing::AnyOf("bf16", "f32"));
}

TEST(Cli, CacheDirReachesTheCompiledModel) {
  const std::string dir = temp_path("cache_dir");
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  const std::string report = temp_path("cache.json");
  RunResult r = run_troupe("bench -niter 5 -cache_dir '" + dir + "' -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_json(report).at("config").at("cache_dir").get<std::string>(), dir);
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Cli, SecondRunWithACacheDirLoadsFromTheCache) {
  // Only a model file is cached (not the embedded model), so the default model is saved as one.
  const std::string model = temp_path("cached.troupe");
  troupe::save_model(troupe::apps::make_default_model(), model);
  const std::string dir = temp_path("model_cache");
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  const std::string report = temp_path("cached.json");
  const std::string args =
      "bench -m '" + model + "' -niter 5 -cache_dir '" + dir + "' -report json '" + report + "'";

  RunResult first = run_troupe(args);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  EXPECT_FALSE(read_json(report).at("config").at("loaded_from_cache").get<bool>());
  EXPECT_THAT(first.output, ::testing::ContainsRegex("loaded from cache +no"));

  RunResult second = run_troupe(args);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_TRUE(read_json(report).at("config").at("loaded_from_cache").get<bool>());
  EXPECT_THAT(second.output, ::testing::ContainsRegex("loaded from cache +yes"));

  std::remove(model.c_str());
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Cli, NoProgressBarWhenStderrIsNotATerminal) {
  // run_troupe redirects stderr to a file: no carriage-return redraws may appear.
  RunResult r = run_troupe("bench -niter 20");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find('\r'), std::string::npos);
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("] 100%")));
}

// Inputs whose first dimensions differ (a graph network's nodes beside its edges) have no batch:
// each request counts once. Inputs that share it are a batch of that many.
TEST(Cli, ABatchIsTheFirstDimensionEveryInputShares) {
  for (const int64_t rows_b : {int64_t{2}, int64_t{6}}) {
    troupe::ModelBuilder b("two_inputs");
    auto a = b.input("a", troupe::ElementType::f32, {6, 4});
    auto c = b.input("b", troupe::ElementType::f32, {rows_b, 4});
    b.output(b.op("Concat", {a, c}, {{"axis", int64_t{0}}}, "join"), "y");
    const std::string model = temp_path("two_inputs.troupe");
    troupe::save_model(b.build(), model);
    const std::string report = temp_path("two_inputs.json");
    RunResult r = run_troupe("bench -m '" + model + "' -niter 10 -report json '" + report + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const json j = read_json(report);
    const int64_t batch = rows_b == 6 ? 6 : 1;
    EXPECT_EQ(j.at("config").at("batch").get<int64_t>(), batch) << rows_b;
    EXPECT_NEAR(j.at("results").at("throughput_fps").get<double>(),
                10.0 * static_cast<double>(batch) / j.at("results").at("duration_s").get<double>(),
                1e-6);
    std::remove(model.c_str());
    std::remove(report.c_str());
  }
}

// Integer inputs get the small values 0-9 the ONNX Runtime peer feeds too (before: zeros): an
// embedding table of 10 rows takes them, one of 5 rows fails the run naming the lookup.
TEST(Cli, BenchFeedsIntegerInputsValuesUpToNine) {
  for (const troupe::ElementType type : {troupe::ElementType::i64, troupe::ElementType::i32})
    for (const int64_t rows : {int64_t{10}, int64_t{5}}) {
      troupe::ModelBuilder b("lookup");
      auto ids = b.input("ids", type, {1, 64});
      std::vector<float> table(static_cast<size_t>(rows * 2), 1.0f);
      auto t =
          b.constant("table", troupe::Tensor::from_vector<float>(troupe::Shape{rows, 2}, table));
      b.output(b.op("Gather", {t, ids}, {}, "lookup"), "y");
      const std::string model = temp_path("lookup.troupe");
      troupe::save_model(b.build(), model);
      RunResult r = run_troupe("bench -m '" + model + "' -niter 4 -nireq 2");
      std::remove(model.c_str());
      if (rows == 10) {
        EXPECT_EQ(r.exit_code, 0) << r.output;
      } else {
        EXPECT_NE(r.exit_code, 0) << r.output;
        EXPECT_THAT(r.output, HasSubstr("Gather node 'lookup': index"));
        EXPECT_THAT(r.output, HasSubstr("out of range for axis 0 of size 5"));
      }
    }
}

// -i gives an input's data from a .npy file, for every request: the categories of a table of 5
// rows that bench's generated 0-9 would overrun, in the shape the file has (the model's batch is
// dynamic), the other input generated. Names and types are checked.
TEST(Cli, BenchTakesAnInputsDataFromAFile) {
  troupe::ModelBuilder b("categories");
  auto ids = b.input("ids", troupe::ElementType::i64, {troupe::Shape::dynamic, 3});
  auto scale = b.input("scale", troupe::ElementType::f32, {1, 1, 2});
  auto t = b.constant("table", troupe::Tensor::from_vector<float>(troupe::Shape{5, 2},
                                                                  std::vector<float>(10, 1.0f)));
  b.output(b.op("Mul", {b.op("Gather", {t, ids}, {}, "lookup"), scale}, {}, "scaled"), "y");
  const std::string model = temp_path("categories.troupe");
  troupe::save_model(b.build(), model);
  const std::string ids_file = temp_path("ids.npy"), scale_file = temp_path("scale.npy");
  troupe::serialization::write_npy(troupe::Tensor::from_vector<int64_t>(
                                       troupe::Shape{4, 3}, {0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 4, 4}),
                                   ids_file);
  troupe::serialization::write_npy(
      troupe::Tensor::from_vector<float>(troupe::Shape{1, 1, 2}, {0.5f, 2.0f}), scale_file);
  const std::string bench = "bench -m '" + model + "' -niter 4 -nireq 2 ";
  RunResult generated = run_troupe(bench + "-shape 'ids[4,3]'");
  EXPECT_NE(generated.exit_code, 0) << generated.output;
  EXPECT_THAT(generated.output, HasSubstr("out of range for axis 0 of size 5"));
  RunResult given = run_troupe(bench + "-i 'ids=" + ids_file + "' --report json '" +
                               temp_path("categories.json") + "'");
  EXPECT_EQ(given.exit_code, 0) << given.output;
  EXPECT_THAT(given.output, HasSubstr("run as                  ids [4,3]"));
  RunResult unknown = run_troupe(bench + "-i 'labels=" + ids_file + "'");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_THAT(unknown.output, HasSubstr("-i: the model has no input 'labels'"));
  RunResult wrong_type = run_troupe(bench + "-i 'ids=" + scale_file + "'");
  EXPECT_NE(wrong_type.exit_code, 0);
  EXPECT_THAT(wrong_type.output, HasSubstr("-i: input 'ids' is i64, its file holds f32"));
  RunResult other_shape = run_troupe(bench + "-i 'ids=" + ids_file + "' -shape 'ids[2,3]'");
  EXPECT_NE(other_shape.exit_code, 0);
  EXPECT_THAT(other_shape.output, HasSubstr("has the shape [4,3] in its file and [2,3] in -shape"));
  for (const std::string& f : {model, ids_file, scale_file, temp_path("categories.json")})
    std::remove(f.c_str());
}

// An ONNX model with a dynamic batch, x f32[N,3,4,4] -> Relu -> y; empty if it cannot be made.
std::string write_dynamic_batch_model() {
  const std::string path = temp_path("dynamic_batch.onnx");
  const std::string script =
      "import onnx\n"
      "from onnx import helper, TensorProto\n"
      "x = helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 3, 4, 4])\n"
      "y = helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3, 4, 4])\n"
      "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'], name='relu')], 'dyn', [x], "
      "[y])\n"
      "onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)]), '" +
      path + "')\n";
  const std::string script_path = temp_path("make_dynamic.py");
  std::ofstream(script_path) << script;
  const int status =
      std::system(("/usr/bin/python3 '" + script_path + "' > /dev/null 2>&1").c_str());
  std::remove(script_path.c_str());
  return status == 0 ? path : std::string();
}

TEST(Cli, BatchAndShapeForADynamicModel) {
  const std::string model = write_dynamic_batch_model();
  if (model.empty()) GTEST_SKIP() << "cannot write an ONNX model with /usr/bin/python3";
  const std::string report = temp_path("batch.json");
  RunResult r = run_troupe("bench -m '" + model + "' -b 4 -niter 20 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("x [4,3,4,4]"));
  json j = read_json(report);
  EXPECT_EQ(j.at("config").at("batch").get<int>(), 4);
  EXPECT_EQ(j.at("results").at("count").get<int>(), 20);
  EXPECT_EQ(j.at("results").at("failed").get<int>(), 0);
  // Throughput counts each batch element: 20 requests of 4 images.
  EXPECT_NEAR(j.at("results").at("throughput_fps").get<double>(),
              80.0 / j.at("results").at("duration_s").get<double>(), 1e-6);

  // -shape sets the dynamic dimension the same way; "[...]" alone names the only input.
  for (const std::string shape : {"x[2,3,4,4]", "[2,3,4,4]"}) {
    r = run_troupe("bench -m '" + model + "' -shape '" + shape + "' -niter 10 -report json '" +
                   report + "'");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    j = read_json(report);
    EXPECT_EQ(j.at("config").at("batch").get<int>(), 2) << shape;
    EXPECT_NEAR(j.at("results").at("throughput_fps").get<double>(),
                20.0 / j.at("results").at("duration_s").get<double>(), 1e-6);
  }

  // A static dimension cannot be changed, and -b must agree with -shape.
  r = run_troupe("bench -m '" + model + "' -shape 'x[2,4,4,4]' -niter 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("static in dimension 1"));
  r = run_troupe("bench -m '" + model + "' -b 3 -shape 'x[2,3,4,4]' -niter 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("contradicts"));
  std::remove(model.c_str());
}

TEST(Cli, ReshapeCompilesStaticAndAutoBatchNeedsADynamicBatch) {
  const std::string model = write_dynamic_batch_model();
  if (model.empty()) GTEST_SKIP() << "cannot write an ONNX model with /usr/bin/python3";
  const std::string report = temp_path("reshape.json");
  // Without --reshape the compiled model stays dynamic; with it, static in the -b shape.
  RunResult r = run_troupe("bench -m '" + model + "' -b 3 -niter 8 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(read_json(report).at("config").at("inputs")[0].at("shape"), json({3, 3, 4, 4}));
  r = run_troupe("bench -m '" + model + "' -b 3 --reshape -niter 8 -report json '" + report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json j = read_json(report);
  EXPECT_EQ(j.at("config").at("inputs")[0].at("shape"), json({3, 3, 4, 4}));
  EXPECT_EQ(j.at("results").at("failed").get<int>(), 0);

  // Automatic batching: on for the dynamic model, off (and said so) once it is static.
  r = run_troupe("bench -m '" + model +
                 "' --auto_batch 4 -hint throughput -niter 40 "
                 "-report json '" +
                 report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = read_json(report);
  EXPECT_EQ(j.at("config").at("auto_batch_max_size").get<int>(), 4);
  EXPECT_EQ(j.at("results").at("failed").get<int>(), 0);
  EXPECT_THAT(r.output, HasSubstr("merged runs"));
  r = run_troupe("bench -m '" + model + "' --auto_batch 4 --reshape -niter 4 -report json '" +
                 report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_json(report).at("config").at("auto_batch_max_size").get<int>(), 1);
  EXPECT_THAT(r.output, HasSubstr("off (asked for 4"));

  // A shape the model's static dimensions refuse is named before anything compiles.
  r = run_troupe("bench -m '" + model + "' --reshape -shape 'x[2,5,4,4]' -niter 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("input 'x' is static in dimension 1"));

  // A compiled blob's shapes are fixed.
  const std::string blob = temp_path("reshape.blob");
  r = run_troupe("compile -m '" + model + "' -o '" + blob + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_troupe("bench -m '" + blob + "' --reshape -niter 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("compiled blob"));
  std::remove(blob.c_str());
  std::remove(model.c_str());
}

TEST(Cli, InputOutputPrecisionAndMeanScaleValues) {
  const std::string report = temp_path("ppp.json");
  RunResult r = run_troupe(
      "bench -ip u8 -op f16 -mean_values 'image[123.7,116.3,103.5]' "
      "-scale_values '[58.4,57.1,57.4]' -niter 10 -report json '" +
      report + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("image u8 [1,3,32,32]"));
  EXPECT_THAT(r.output, HasSubstr("probabilities f16 [1,10]"));
  const json j = read_json(report);
  // The caller's side of the model: u8 in, f16 out, same shapes.
  EXPECT_EQ(j.at("config").at("inputs")[0].at("type").get<std::string>(), "u8");
  EXPECT_EQ(j.at("config").at("inputs")[0].at("shape"), json({1, 3, 32, 32}));
  EXPECT_EQ(j.at("config").at("outputs")[0].at("type").get<std::string>(), "f16");
  EXPECT_EQ(j.at("config").at("outputs")[0].at("shape"), json({1, 10}));
  EXPECT_EQ(j.at("results").at("count").get<int>(), 10);
  EXPECT_EQ(j.at("results").at("failed").get<int>(), 0);

  // -ip alone on a model file keeps its shapes and converts in the preprocess stage.
  const std::string model = write_dynamic_batch_model();
  if (model.empty()) GTEST_SKIP() << "cannot write an ONNX model with /usr/bin/python3";
  r = run_troupe("bench -m '" + model + "' -b 2 -ip f16 -mean_values '[1,2,3]' -niter 5");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("x f16 [?,3,4,4]"));
  std::remove(model.c_str());
}

TEST(Cli, ProgressBarOnATerminal) {
  // util-linux `script` gives the command a pseudo-terminal; its transcript holds what was drawn.
  if (std::system("command -v script > /dev/null 2>&1") != 0) GTEST_SKIP() << "no `script`";
  const std::string transcript = temp_path("tty.txt");
  const std::string cmd = "script -qec \"" + std::string(TROUPE_BINARY_DIR) +
                          "/bin/troupe bench -niter 200\" '" + transcript + "' > /dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(transcript);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(transcript.c_str());
  const std::string text = ss.str();
  const std::string full = "[" + std::string(40, '#') + "] 100%";
  const size_t first = text.find(full);
  ASSERT_NE(first, std::string::npos) << text;
  EXPECT_EQ(text.find(full, first + 1), std::string::npos) << "100% drawn more than once";
  EXPECT_NE(text.find('\r'), std::string::npos);
}

TEST(Cli, HelpIsClear) {
  RunResult top = run_troupe("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.output, HasSubstr("bench"));
  EXPECT_THAT(top.output, HasSubstr("info"));
  RunResult bench = run_troupe("bench --help");
  EXPECT_EQ(bench.exit_code, 0);
  for (const char* opt : {"--model",           "--hint",        "--nireq",
                          "--nstreams",        "--nthreads",    "--time",
                          "--niter",           "--pc",          "--report",
                          "--device",          "--pcsort",      "--exec_graph_path",
                          "--infer_precision", "--cache_dir",   "--batch",
                          "--shape",           "--ip",          "--op",
                          "--mean_values",     "--scale_values"})
    EXPECT_THAT(bench.output, HasSubstr(opt)) << opt;
  RunResult version = run_troupe("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.output, HasSubstr("troupe"));
}

TEST(Cli, InfoShowsTheDeviceProperties) {
  RunResult r = run_troupe("info --ops");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[ CPU ]"));
  EXPECT_THAT(r.output, HasSubstr("FULL_DEVICE_NAME"));
  EXPECT_THAT(r.output, HasSubstr("NUM_STREAMS"));
  EXPECT_THAT(r.output, HasSubstr("RANGE_FOR_ASYNC_INFER_REQUESTS"));
  EXPECT_THAT(r.output, HasSubstr("Conv"));
}

struct BadInvocation {
  const char* args;
  const char* message;  // part of what the user must be told
};

void PrintTo(const BadInvocation& b, std::ostream* os) {
  *os << "troupe " << b.args;
}

class CliRejects : public ::testing::TestWithParam<BadInvocation> {};

TEST_P(CliRejects, WithNonZeroExitAndAMessage) {
  RunResult r = run_troupe(GetParam().args);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(GetParam().message)) << r.output;
}

INSTANTIATE_TEST_SUITE_P(
    BadOptions, CliRejects,
    ::testing::Values(
        BadInvocation{"", "A subcommand is required"},
        BadInvocation{"frobnicate", "unknown command 'frobnicate'"},
        BadInvocation{"bench --bogus", "--bogus"}, BadInvocation{"bench -hint fast", "hint"},
        BadInvocation{"bench -nireq 0", "nireq"}, BadInvocation{"bench -niter many", "niter"},
        BadInvocation{"bench -t -1", "time"},
        BadInvocation{"bench -report xml out.xml", "report type 'xml'"},
        BadInvocation{"bench -report json", "report"},
        BadInvocation{"bench -pcsort fastest", "pcsort"},
        BadInvocation{"bench -ip bogus -niter 1", "unknown element type 'bogus'"},
        BadInvocation{"bench -op u8 -niter 1", "f32 cannot become u8"},
        BadInvocation{"bench -mean_values image[1,2] -niter 1", "mean has 2 values for 3 channels"},
        BadInvocation{"bench -scale_values foo[1] -niter 1", "no input 'foo'"},
        BadInvocation{"bench -mean_values image[1,a,2] -niter 1", "'a' is not a number"},
        BadInvocation{"bench -b 4 -niter 1", "static batch of 1"},
        BadInvocation{"bench -b 0", "batch"},
        BadInvocation{"bench -shape image[2,3,32,32] -niter 1", "static in dimension 0"},
        BadInvocation{"bench -shape nosuch[1,2] -niter 1", "no input 'nosuch'"},
        BadInvocation{"bench -shape image[1,x] -niter 1", "not a positive integer"},
        BadInvocation{"bench -infer_precision i8", "infer_precision"},
        BadInvocation{"bench -m /nonexistent/model.onnx", "/nonexistent/model.onnx"},
        BadInvocation{"bench -d GPU -niter 1", "GPU"}, BadInvocation{"info -d GPU", "GPU"}));

}  // namespace
