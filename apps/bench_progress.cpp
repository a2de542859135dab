#include "apps/bench_progress.hpp"

#include <algorithm>
#include <iostream>
#include <string>

#include <unistd.h>

#include "apps/bench_clock.hpp"

namespace troupe::apps {

ProgressBar::ProgressBar() : enabled_(::isatty(STDERR_FILENO) != 0) {}

void ProgressBar::update(double fraction) {
  if (!enabled_) return;
  fraction = std::min(1.0, std::max(0.0, fraction));
  const int percent = static_cast<int>(fraction * 100);
  const int64_t t = now_ns();
  if (percent == last_percent_ || (t - last_ns_ < 100'000'000 && percent < 100)) return;
  last_ns_ = t;
  last_percent_ = percent;
  const int width = 40;
  const int filled = static_cast<int>(fraction * width);
  std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
            << std::string(static_cast<size_t>(width - filled), ' ') << "] " << percent << "%"
            << std::flush;
}

void ProgressBar::finish() {
  if (!enabled_) return;
  update(1.0);
  std::cerr << "\n" << std::flush;
}

}  // namespace troupe::apps
