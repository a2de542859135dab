#include "apps/quantize_calibration.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "apps/run_command.hpp"
#include "serialization/npy_format.hpp"
#include "troupe/error.hpp"
#include "troupe/infer_request.hpp"

namespace troupe::apps {

namespace {

namespace fs = std::filesystem;

constexpr size_t histogram_bins = 2048;

Tensor read_input(const fs::path& file, const ValueInfo& info) {
  Tensor t = serialization::read_npy(file.string());
  check_input_file(info, t, file.string());
  return t;
}

}  // namespace

std::vector<CalibrationSample> read_calibration_samples(const std::string& dir,
                                                        const std::vector<ValueInfo>& inputs) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InvalidArgument("the calibration folder '" + dir + "' is not a directory");
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  std::vector<CalibrationSample> samples;
  if (inputs.size() == 1) {
    for (const auto& p : entries)
      if (p.extension() == ".npy" && fs::is_regular_file(p))
        samples.push_back({p.string(), {{inputs[0].name, read_input(p, inputs[0])}}});
    if (samples.empty())
      throw InvalidArgument(fmt::format(
          "the calibration folder '{}' holds no .npy file (one file per sample of the input '{}' "
          "{} {})",
          dir, inputs[0].name, to_string(inputs[0].type), inputs[0].shape.to_string()));
    return samples;
  }
  for (const auto& p : entries) {
    if (!fs::is_directory(p)) continue;
    CalibrationSample sample{p.string(), {}};
    for (const auto& in : inputs) {
      const fs::path file = p / (in.name + ".npy");
      if (!fs::is_regular_file(file))
        throw InvalidArgument(fmt::format("the sample '{}' has no '{}.npy' for the input '{}'",
                                          p.string(), in.name, in.name));
      sample.inputs[in.name] = read_input(file, in);
    }
    samples.push_back(std::move(sample));
  }
  if (samples.empty())
    throw InvalidArgument(fmt::format(
        "the calibration folder '{}' holds no sample: the model has {} inputs, so each sample is "
        "a subfolder with one NAME.npy per input",
        dir, inputs.size()));
  return samples;
}

std::map<std::string, Tensor> run_sample(CompiledModel& compiled, InferRequest& request,
                                         const CalibrationSample& sample) {
  for (const auto& [name, tensor] : sample.inputs) request.set_tensor(name, tensor);
  request.infer();
  std::map<std::string, Tensor> outputs;
  for (size_t i = 0; i < compiled.outputs().size(); ++i)
    outputs[compiled.outputs()[i].name] = request.get_output_tensor(i).clone();
  return outputs;
}

RangeCollector::RangeCollector(double percentile) : percentile_(percentile) {
  if (!(percentile > 50.0 && percentile <= 100.0))
    throw InvalidArgument(fmt::format("the percentile {} is not in (50, 100]", percentile));
}

void RangeCollector::observe(const std::string& tensor, const Tensor& values) {
  if (values.element_type() != ElementType::f32) return;
  const Tensor dense = values.contiguous();
  const float* data = dense.data<float>();
  if (dense.size() == 0) return;
  const auto [lo, hi] = std::minmax_element(data, data + dense.size());
  Stats& s = stats_[tensor];
  s.min = s.seen ? std::min(s.min, *lo) : *lo;
  s.max = s.seen ? std::max(s.max, *hi) : *hi;
  s.seen = true;
}

void RangeCollector::observe_histogram(const std::string& tensor, const Tensor& values) {
  auto it = stats_.find(tensor);
  if (it == stats_.end() || values.element_type() != ElementType::f32) return;
  Stats& s = it->second;
  if (s.histogram.empty()) s.histogram.assign(histogram_bins, 0);
  const Tensor dense = values.contiguous();
  const float* data = dense.data<float>();
  const double width = (static_cast<double>(s.max) - s.min) / histogram_bins;
  for (int64_t i = 0; i < dense.size(); ++i) {
    size_t bin = width > 0 ? static_cast<size_t>((data[i] - s.min) / width) : 0;
    s.histogram[std::min(bin, histogram_bins - 1)]++;
  }
  s.count += static_cast<uint64_t>(dense.size());
}

std::map<std::string, ActivationRange> RangeCollector::ranges() const {
  std::map<std::string, ActivationRange> out;
  for (const auto& [name, s] : stats_) {
    if (!std::isfinite(s.min) || !std::isfinite(s.max))
      throw InvalidArgument(fmt::format(
          "activation '{}' took a value that is not finite ({} .. {}) on the calibration samples",
          name, s.min, s.max));
    ActivationRange r{s.min, s.max};
    if (percentile_ < 100.0 && s.count > 0) {
      const double width = (static_cast<double>(s.max) - s.min) / histogram_bins;
      const double tail = s.count * (100.0 - percentile_) / 100.0;
      double below = 0;
      size_t lo_bin = 0;
      while (lo_bin < histogram_bins && below + s.histogram[lo_bin] <= tail)
        below += s.histogram[lo_bin++];
      double above = 0;
      size_t hi_bin = histogram_bins;
      while (hi_bin > lo_bin + 1 && above + s.histogram[hi_bin - 1] <= tail)
        above += s.histogram[--hi_bin];
      r.lo = static_cast<float>(s.min + lo_bin * width);
      r.hi = static_cast<float>(s.min + hi_bin * width);
    }
    out[name] = r;
  }
  return out;
}

}  // namespace troupe::apps
