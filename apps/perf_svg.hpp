#pragma once

#include <string>
#include <vector>

#include "apps/perf_report.hpp"

namespace troupe::apps {

/// Writes the latency-throughput curve as a standalone SVG: throughput on x, p99 latency on y, a
/// point per level labelled with its concurrency, joined in order. Throws PerfError when `path`
/// cannot be written.
void write_svg(const std::string& path, const std::vector<LevelRow>& rows,
               const std::string& title);

}  // namespace troupe::apps
