#pragma once

// `troupe bench -trace FILE` and `-timeline FILE`: pictures of the measured phase drawn from the
// request traces the compiled model's pipeline recorded.

#include <string>

#include "troupe/compiled_model.hpp"

namespace troupe::apps {

/// Writes a Chrome Trace Event / Perfetto JSON of the run to `path` (per-op spans when PERF_COUNT
/// was on) and says so on stdout. Throws when the file cannot be written.
void write_chrome_trace(const std::string& path, const CompiledModel& compiled);

/// Writes an SVG of stage occupancy over time to `path` and says so on stdout. Throws when the
/// file cannot be written.
void write_timeline(const std::string& path, const CompiledModel& compiled);

}  // namespace troupe::apps
