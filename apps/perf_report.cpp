#include "apps/perf_report.hpp"

#include <fstream>

#include <fmt/format.h>

#include "apps/perf_error.hpp"

namespace troupe::apps {

namespace {

struct Column {
  const char* title;  // in the table
  const char* csv;    // in the CSV header
  int width;
};

constexpr Column columns[] = {
    {"Concurrency", "concurrency", 11},
    {"Inferences/s", "inferences_per_s", 12},
    {"p50 us", "p50_us", 9},
    {"p90 us", "p90_us", 9},
    {"p95 us", "p95_us", 9},
    {"p99 us", "p99_us", 9},
    {"Errors", "errors", 7},
    {"Srv queue us", "server_queue_us", 12},
    {"Srv input us", "server_input_us", 12},
    {"Srv infer us", "server_infer_us", 12},
    {"Srv output us", "server_output_us", 13},
};

// A row's cells; `missing` stands for the server figures when there are none.
std::vector<std::string> cells(const LevelRow& r, const std::string& missing) {
  std::vector<std::string> c = {
      std::to_string(r.concurrency),   fmt::format("{:.1f}", r.throughput),
      fmt::format("{:.0f}", r.p50_us), fmt::format("{:.0f}", r.p90_us),
      fmt::format("{:.0f}", r.p95_us), fmt::format("{:.0f}", r.p99_us),
      std::to_string(r.errors)};
  for (double v :
       {r.server ? r.server->queue_us : 0, r.server ? r.server->compute_input_us : 0,
        r.server ? r.server->compute_infer_us : 0, r.server ? r.server->compute_output_us : 0})
    c.push_back(r.server ? fmt::format("{:.1f}", v) : missing);
  return c;
}

}  // namespace

LevelRow summarize(const LevelResult& level) {
  const PhaseResult& m = level.measured;
  LevelRow r;
  r.concurrency = level.concurrency;
  r.throughput = m.seconds > 0 ? static_cast<double>(m.ok) / m.seconds : 0;
  r.p50_us = percentile(m.latencies_us, 50);
  r.p90_us = percentile(m.latencies_us, 90);
  r.p95_us = percentile(m.latencies_us, 95);
  r.p99_us = percentile(m.latencies_us, 99);
  r.ok = m.ok;
  r.errors = m.errors;
  r.first_error = m.first_error;
  r.server = level.server;
  return r;
}

void print_table(std::ostream& out, const std::vector<LevelRow>& rows) {
  std::string line;
  for (const Column& c : columns) line += fmt::format("{:>{}}  ", c.title, c.width);
  out << line.substr(0, line.size() - 2) << "\n";
  for (const LevelRow& r : rows) {
    const auto row = cells(r, "-");
    line.clear();
    for (size_t i = 0; i < row.size(); ++i)
      line += fmt::format("{:>{}}  ", row[i], columns[i].width);
    out << line.substr(0, line.size() - 2) << "\n";
  }
}

void write_csv(const std::string& path, const std::vector<LevelRow>& rows) {
  std::ofstream file(path);
  if (!file) throw PerfError("cannot write the CSV file '" + path + "'");
  std::string header;
  for (const Column& c : columns) header += (header.empty() ? "" : ",") + std::string(c.csv);
  file << header << "\n";
  for (const LevelRow& r : rows) {
    const auto row = cells(r, "");
    for (size_t i = 0; i < row.size(); ++i) file << (i ? "," : "") << row[i];
    file << "\n";
  }
  if (!file.flush()) throw PerfError("cannot write the CSV file '" + path + "'");
}

}  // namespace troupe::apps
