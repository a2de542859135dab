#pragma once

// `troupe quantize`'s calibration: the samples it runs (a folder of .npy files) and the ranges
// it records for each activation (min/max, or a percentile of a histogram).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "apps/quantize_qdq.hpp"
#include "troupe/compiled_model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::apps {

/// One set of model inputs and where it came from.
struct CalibrationSample {
  std::string source;
  std::map<std::string, Tensor> inputs;
};

/// The samples in `dir`. A model with one input takes every `*.npy` file in `dir` as a sample; a
/// model with several takes every subfolder holding `NAME.npy` per input. Sorted by path. Throws
/// InvalidArgument naming the folder or file when none is found or one does not fit the model
/// (element type, shape), FormatError for a file that is not .npy.
std::vector<CalibrationSample> read_calibration_samples(const std::string& dir,
                                                        const std::vector<ValueInfo>& inputs);

/// Runs `sample` on `compiled` and returns every output by name.
std::map<std::string, Tensor> run_sample(CompiledModel& compiled, InferRequest& request,
                                         const CalibrationSample& sample);

/// Records, per activation, the range its values take over the calibration samples.
class RangeCollector {
 public:
  /// `percentile` 100 keeps the observed min and max; below 100 (e.g. 99.999) clips the
  /// (100 - p)% smallest and largest values, which a second pass over the samples locates in a
  /// 2048-bin histogram between the observed min and max.
  explicit RangeCollector(double percentile);

  bool needs_second_pass() const { return percentile_ < 100.0; }
  /// First pass: min and max.
  void observe(const std::string& tensor, const Tensor& values);
  /// Second pass: the histograms.
  void observe_histogram(const std::string& tensor, const Tensor& values);

  /// The ranges; InvalidArgument naming a tensor never observed or not finite.
  std::map<std::string, ActivationRange> ranges() const;

 private:
  struct Stats {
    float min = 0.0f;
    float max = 0.0f;
    bool seen = false;
    std::vector<uint64_t> histogram;
    uint64_t count = 0;
  };
  double percentile_;
  std::map<std::string, Stats> stats_;
};

}  // namespace troupe::apps
