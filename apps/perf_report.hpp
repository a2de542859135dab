#pragma once

// What `troupe perf` prints and writes: a row per concurrency level, as a table and as CSV.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/perf_load.hpp"
#include "apps/perf_server_stats.hpp"

namespace troupe::apps {

/// One concurrency level's figures.
struct LevelRow {
  int concurrency = 0;
  double throughput = 0;  // successful inferences per second
  double p50_us = 0, p90_us = 0, p95_us = 0, p99_us = 0;
  uint64_t ok = 0, errors = 0;
  std::string first_error;
  std::optional<ServerBreakdown> server;
};

/// The figures of a level's measured phase.
LevelRow summarize(const LevelResult& level);

/// The table, perf_analyzer-style: a line per level, "-" for server figures not available.
void print_table(std::ostream& out, const std::vector<LevelRow>& rows);

/// The same columns as CSV with a header line (empty fields where the table shows "-"). Throws
/// PerfError when `path` cannot be written.
void write_csv(const std::string& path, const std::vector<LevelRow>& rows);

}  // namespace troupe::apps
