// The `troupe` command line, run as a user runs it: exit codes, messages and the JSON report.

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "troupe/profiling_info.hpp"

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

TEST(Cli, HelpIsClear) {
  RunResult top = run_troupe("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.output, HasSubstr("bench"));
  EXPECT_THAT(top.output, HasSubstr("info"));
  RunResult bench = run_troupe("bench --help");
  EXPECT_EQ(bench.exit_code, 0);
  for (const char* opt : {"--model", "--hint", "--nireq", "--nstreams", "--nthreads", "--time",
                          "--niter", "--pc", "--report", "--device"})
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
        BadInvocation{"bench -m /nonexistent/model.onnx", "/nonexistent/model.onnx"},
        BadInvocation{"bench -d GPU -niter 1", "GPU"}, BadInvocation{"info -d GPU", "GPU"}));

}  // namespace
