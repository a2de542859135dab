#pragma once

// `troupe bench -report json FILE`: every figure the console report prints, as JSON.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench_model.hpp"
#include "apps/bench_op_counters.hpp"
#include "apps/bench_options.hpp"
#include "apps/bench_statistics.hpp"
#include "apps/bench_workload.hpp"
#include "troupe/model.hpp"

namespace troupe::apps {

/// A value as the JSON files describe it: {"name", "type", "shape"}.
nlohmann::json value_json(const ValueInfo& value);

/// Writes the report to `path` and says so on stdout; per-op counters are included with --pc.
/// Throws when the file cannot be written.
void write_json_report(const std::string& path, const BenchOptions& options,
                       const BenchModel& model, const Workload& workload, const RunResults& results,
                       const std::vector<OpCounter>& ops);

}  // namespace troupe::apps
