#pragma once

// The progress bar `troupe bench` draws on stderr during the measured phase.

#include <cstdint>

namespace troupe::apps {

/// A one-line bar redrawn in place on stderr, when stderr is a terminal (a file or a pipe would
/// fill with redraws).
class ProgressBar {
 public:
  ProgressBar();
  /// `fraction` of the run done, clamped to [0, 1]; redraws when the percentage changed, at most
  /// every 100 ms before 100%.
  void update(double fraction);
  /// Draws 100% and ends the line.
  void finish();

 private:
  bool enabled_;
  int64_t last_ns_ = 0;
  int last_percent_ = -1;
};

}  // namespace troupe::apps
