#include "apps/perf_concurrency.hpp"

#include <algorithm>
#include <cctype>

#include "apps/perf_error.hpp"

namespace troupe::apps {

namespace {

constexpr long max_concurrency = 4096;
constexpr size_t max_levels = 256;

long parse_count(const std::string& text, const std::string& range) {
  if (text.empty() || text.size() > 6 ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
    throw PerfError("bad --concurrency-range '" + range + "': '" + text +
                    "' is not a count (expected START[:END[:STEP]], e.g. 1:64:2x)");
  return std::stol(text);
}

}  // namespace

std::vector<int> parse_concurrency_range(const std::string& range) {
  std::vector<std::string> parts{""};
  for (char c : range) {
    if (c == ':')
      parts.emplace_back();
    else
      parts.back() += c;
  }
  if (parts.size() > 3)
    throw PerfError("bad --concurrency-range '" + range + "': expected START[:END[:STEP]]");

  const long start = parse_count(parts[0], range);
  const long end = parts.size() > 1 ? parse_count(parts[1], range) : start;
  std::string step = parts.size() > 2 ? parts[2] : "1";
  const bool multiply = !step.empty() && (step.back() == 'x' || step.back() == 'X');
  if (multiply) step.pop_back();
  if (!multiply && !step.empty() && step[0] == '+') step.erase(0, 1);
  const long by = parse_count(step, range);

  if (start < 1 || end > max_concurrency)
    throw PerfError("bad --concurrency-range '" + range + "': levels must be within 1.." +
                    std::to_string(max_concurrency));
  if (end < start) throw PerfError("bad --concurrency-range '" + range + "': END is below START");
  if (multiply ? by < 2 : by < 1)
    throw PerfError("bad --concurrency-range '" + range + "': STEP must be " +
                    (multiply ? "at least 2x" : "at least 1"));

  std::vector<int> levels;
  for (long c = start; c < end && levels.size() <= max_levels; c = multiply ? c * by : c + by)
    levels.push_back(static_cast<int>(c));
  levels.push_back(static_cast<int>(end));
  if (levels.size() > max_levels)
    throw PerfError("bad --concurrency-range '" + range + "': more than " +
                    std::to_string(max_levels) + " levels");
  return levels;
}

}  // namespace troupe::apps
