#pragma once

#include <string>
#include <vector>

namespace troupe::apps {

/// The concurrency levels of "START[:END[:STEP]]": STEP "N" or "+N" adds N (default 1), "Nx"
/// multiplies by N (N >= 2), e.g. "1:64:2x" = 1 2 4 8 16 32 64; END is always included when the
/// steps overshoot it. Throws PerfError for a malformed range, a level outside 1..4096 or more
/// than 256 levels.
std::vector<int> parse_concurrency_range(const std::string& range);

}  // namespace troupe::apps
