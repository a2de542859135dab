// Reference kernels of the signal-processing ops (ONNX opset 17): HannWindow, HammingWindow,
// BlackmanWindow, MelWeightMatrix, DFT and STFT. The transforms are the direct O(n^2) sums in
// double, X[k] = sum_j x[j] e^(-2 pi i j k / n): slow, but they state the definition and need no
// power-of-two lengths.

#include <algorithm>
#include <cmath>
#include <complex>
#include <string>
#include <vector>

#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;
using Complex = std::complex<double>;

constexpr double pi = 3.14159265358979323846;

// The single value of a scalar integer input.
int64_t read_scalar(const Node& node, const Tensor& t, const std::string& what) {
  const std::vector<int64_t> values = read_ints(node, t, what);
  if (values.size() != 1)
    fail(node, what + " must be a scalar, got shape " + t.shape().to_string());
  return values.front();
}

// The single value of a scalar floating input.
double read_float_scalar(const Node& node, const Tensor& t, const std::string& what) {
  if (t.size() != 1) fail(node, what + " must be a scalar, got shape " + t.shape().to_string());
  return t.value_at(0);
}

// The generalized cosine window sum_m a[m] cos(2 pi m k / N) over k in [0, size), with N = size
// when periodic (the window of a size + 1 symmetric window without its last value) and size - 1
// otherwise. As in ONNX's own function body, a symmetric window of size 1 divides by N = 0.
void cosine_window(const Node& node, const Tensors& in, Tensors& out,
                   const std::vector<double>& a) {
  const int64_t size = read_scalar(node, in[0], "size");
  if (size < 0) fail(node, "size is " + std::to_string(size) + ", expected >= 0");
  const bool periodic = node.attributes.get_int_or("periodic", 1) != 0;
  const auto n = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> w(static_cast<size_t>(size));
  for (int64_t k = 0; k < size; ++k) {
    double v = 0;
    for (size_t m = 0; m < a.size(); ++m)
      v += a[m] * std::cos(2 * pi * static_cast<double>(m) * static_cast<double>(k) / n);
    w[static_cast<size_t>(k)] = v;
  }
  store_values(node, w, out[0]);
}

void hann_window(const Node& node, const Tensors& in, Tensors& out) {
  cosine_window(node, in, out, {0.5, -0.5});
}

void hamming_window(const Node& node, const Tensors& in, Tensors& out) {
  cosine_window(node, in, out, {25.0 / 46.0, -21.0 / 46.0});
}

void blackman_window(const Node& node, const Tensors& in, Tensors& out) {
  cosine_window(node, in, out, {0.42, -0.5, 0.08});
}

// MelWeightMatrix: num_mel_bins triangular filters over the dft_length / 2 + 1 bins of a one-sided
// spectrum. As ONNX's reference: the mel range [mel(lower), mel(upper)] is cut into
// num_mel_bins + 2 equal steps, each edge mapped back to hertz and to the bin
// floor((dft_length + 1) * hz / sample_rate); filter i rises from edge i to edge i + 1 and falls to
// edge i + 2.
void mel_weight_matrix(const Node& node, const Tensors& in, Tensors& out) {
  const int64_t mel_bins = read_scalar(node, in[0], "num_mel_bins");
  const int64_t dft_length = read_scalar(node, in[1], "dft_length");
  const int64_t sample_rate = read_scalar(node, in[2], "sample_rate");
  const double lower_hz = read_float_scalar(node, in[3], "lower_edge_hertz");
  const double upper_hz = read_float_scalar(node, in[4], "upper_edge_hertz");
  if (mel_bins <= 0) fail(node, "num_mel_bins is " + std::to_string(mel_bins) + ", expected > 0");
  if (dft_length <= 0) fail(node, "dft_length is " + std::to_string(dft_length) + ", expected > 0");
  if (sample_rate <= 0)
    fail(node, "sample_rate is " + std::to_string(sample_rate) + ", expected > 0");
  if (lower_hz < 0 || upper_hz < lower_hz)
    fail(node, "the edges [" + std::to_string(lower_hz) + ", " + std::to_string(upper_hz) +
                   "] hertz must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz");
  const int64_t bins = dft_length / 2 + 1;
  auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = mel(lower_hz);
  const double step = (mel(upper_hz) - low_mel) / static_cast<double>(mel_bins + 2);
  std::vector<int64_t> edges(static_cast<size_t>(mel_bins + 2));
  for (int64_t e = 0; e < mel_bins + 2; ++e) {
    const double hz = 700 * (std::pow(10.0, (static_cast<double>(e) * step + low_mel) / 2595) - 1);
    edges[static_cast<size_t>(e)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate)));
  }
  // The edges rise; the filters write up to the last centre and up to, not at, the last edge, which
  // may thus be one past the spectrum's bins but no further.
  if (edges[static_cast<size_t>(mel_bins)] >= bins || edges.back() > bins)
    fail(node, "upper_edge_hertz " + std::to_string(upper_hz) + " maps to bin " +
                   std::to_string(edges.back()) + ", past the " + std::to_string(bins) +
                   " bins of a " + std::to_string(dft_length) + "-point DFT at sample_rate " +
                   std::to_string(sample_rate));
  std::vector<double> w(static_cast<size_t>(bins * mel_bins), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    return w[static_cast<size_t>(j * mel_bins + i)];
  };
  for (int64_t i = 0; i < mel_bins; ++i) {
    const int64_t left = edges[static_cast<size_t>(i)];
    const int64_t center = edges[static_cast<size_t>(i + 1)];
    const int64_t right = edges[static_cast<size_t>(i + 2)];
    if (center == left)
      at(center, i) = 1;
    else
      for (int64_t j = left; j <= center; ++j)
        at(j, i) = static_cast<double>(j - left) / static_cast<double>(center - left);
    for (int64_t j = center; j < right; ++j)
      at(j, i) = static_cast<double>(right - j) / static_cast<double>(right - center);
  }
  store_values(node, w, out[0]);
}

// The complex values of a [..., 1 or 2] floating tensor, in double.
std::vector<Complex> read_complex(const Node& node, const Tensor& t) {
  const std::vector<int64_t>& dims = t.shape().dims();
  const int64_t parts = dims.back();
  if (parts != 1 && parts != 2)
    fail(node,
         "the last dimension of " + t.shape().to_string() + " must be 1 (real) or 2 (complex)");
  std::vector<Complex> values(static_cast<size_t>(t.size() / parts));
  dispatch_floating(node, t.element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = t.data<T>();
    for (size_t k = 0; k < values.size(); ++k)
      values[k] = parts == 1 ? Complex(load(x[k]), 0) : Complex(load(x[2 * k]), load(x[2 * k + 1]));
  });
  return values;
}

// Writes complex values as [..., 2] into out.
void write_complex(const Node& node, const std::vector<Complex>& values, Tensor& out) {
  require_output_size(node, out, static_cast<int64_t>(2 * values.size()));
  dispatch_floating(node, out.element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out.data<T>();
    for (size_t k = 0; k < values.size(); ++k) {
      y[2 * k] = store<T>(values[k].real());
      y[2 * k + 1] = store<T>(values[k].imag());
    }
  });
}

// The first `bins` values of the n-point DFT of x[0], x[stride], ..., x[(count - 1) * stride],
// zero-padded or truncated to n; inverse: the conjugate kernel, scaled by 1 / n.
void dft_1d(const Complex* x, int64_t count, int64_t stride, int64_t n, bool inverse, int64_t bins,
            Complex* y, int64_t y_stride) {
  const double sign = inverse ? 1.0 : -1.0;
  const int64_t used = std::min(count, n);
  for (int64_t k = 0; k < bins; ++k) {
    Complex sum = 0;
    for (int64_t j = 0; j < used; ++j) {
      // j * k mod n keeps the angle small, so the twiddle factor stays exact for large n.
      const double angle =
          sign * 2 * pi * static_cast<double>((j * k) % n) / static_cast<double>(n);
      sum += x[j * stride] * Complex(std::cos(angle), std::sin(angle));
    }
    y[k * y_stride] = inverse ? sum / static_cast<double>(n) : sum;
  }
}

void dft(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& dims = in[0].shape().dims();
  if (dims.size() < 3)
    fail(node, "input must have rank >= 3, got shape " + in[0].shape().to_string());
  const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 1), dims.size());
  if (axis == 0 || axis == dims.size() - 1)
    fail(node, "axis " + std::to_string(axis) + " is not a signal axis of the input " +
                   in[0].shape().to_string());
  const bool inverse = node.attributes.get_int_or("inverse", 0) != 0;
  const bool onesided = node.attributes.get_int_or("onesided", 0) != 0;
  if (onesided && dims.back() == 2)
    fail(node, "onesided is 1 but the input " + in[0].shape().to_string() + " is complex");
  const int64_t count = dims[axis];
  int64_t n = count;
  if (in.size() > 1 && !in[1].empty()) n = read_scalar(node, in[1], "dft_length");
  if (n <= 0) fail(node, "dft_length is " + std::to_string(n) + ", expected > 0");
  const int64_t bins = onesided ? n / 2 + 1 : n;

  const std::vector<Complex> x = read_complex(node, in[0]);
  // Complex elements as [outer][axis][inner].
  int64_t outer = 1;
  int64_t inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= dims[d];
  for (size_t d = axis + 1; d + 1 < dims.size(); ++d) inner *= dims[d];
  std::vector<Complex> y(static_cast<size_t>(outer * bins * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      dft_1d(&x[static_cast<size_t>(o * count * inner + i)], count, inner, n, inverse, bins,
             &y[static_cast<size_t>(o * bins * inner + i)], inner);
  write_complex(node, y, out[0]);
}

// STFT: the DFT of each frame signal[b, f * frame_step : f * frame_step + frame_length] times the
// window (all ones without one).
void stft(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& dims = in[0].shape().dims();
  if (dims.size() != 3)
    fail(node, "signal must have shape [batch, length, 1 or 2], got " + in[0].shape().to_string());
  const int64_t batch = dims[0];
  const int64_t length = dims[1];
  const int64_t step = read_scalar(node, in[1], "frame_step");
  if (step <= 0) fail(node, "frame_step is " + std::to_string(step) + ", expected > 0");
  const bool has_window = in.size() > 2 && !in[2].empty();
  const bool has_frame_length = in.size() > 3 && !in[3].empty();
  std::vector<double> window;
  if (has_window)
    dispatch_floating(node, in[2].element_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* w = in[2].data<T>();
      for (int64_t k = 0; k < in[2].size(); ++k) window.push_back(load(w[k]));
    });
  int64_t frame_length = static_cast<int64_t>(window.size());
  if (has_frame_length) {
    frame_length = read_scalar(node, in[3], "frame_length");
    if (has_window && frame_length != static_cast<int64_t>(window.size()))
      fail(node, "frame_length " + std::to_string(frame_length) + " differs from the window's " +
                     "length " + std::to_string(window.size()));
  } else if (!has_window) {
    fail(node, "neither a window nor a frame_length gives the frame length");
  }
  if (frame_length <= 0 || frame_length > length)
    fail(node, "frame length " + std::to_string(frame_length) + " must be in [1, " +
                   std::to_string(length) + "] (the signal length)");
  if (!has_window) window.assign(static_cast<size_t>(frame_length), 1.0);
  const bool onesided = node.attributes.get_int_or("onesided", 1) != 0;
  if (onesided && dims[2] == 2)
    fail(node, "onesided is 1 but the signal " + in[0].shape().to_string() + " is complex");
  const int64_t bins = onesided ? frame_length / 2 + 1 : frame_length;
  const int64_t frames = (length - frame_length) / step + 1;

  const std::vector<Complex> x = read_complex(node, in[0]);
  std::vector<Complex> frame(static_cast<size_t>(frame_length));
  std::vector<Complex> y(static_cast<size_t>(batch * frames * bins));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < frame_length; ++j)
        frame[static_cast<size_t>(j)] =
            x[static_cast<size_t>(b * length + f * step + j)] * window[static_cast<size_t>(j)];
      dft_1d(frame.data(), frame_length, 1, frame_length, false, bins,
             &y[static_cast<size_t>((b * frames + f) * bins)], 1);
    }
  write_complex(node, y, out[0]);
}

}  // namespace

void register_signal(KernelRegistry& registry) {
  const std::pair<const char*, ReferenceFn> kernels[] = {{"HannWindow", &hann_window},
                                                         {"HammingWindow", &hamming_window},
                                                         {"BlackmanWindow", &blackman_window},
                                                         {"MelWeightMatrix", &mel_weight_matrix},
                                                         {"DFT", &dft},
                                                         {"STFT", &stft}};
  for (const auto& [op_type, fn] : kernels)
    registry.add("reference", 0, op_type,
                 [fn = fn](const KernelRequest& r) { return make_reference_kernel(r.node, fn); });
}

}  // namespace troupe::kernels::reference
