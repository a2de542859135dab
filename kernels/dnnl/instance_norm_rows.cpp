// InstanceNormalization of 3-D f32 tensors [N, C, L] in plain layout, the form GroupNorm exports
// to (x.reshape(N, groups, -1)): each of the N x C rows is normalized by its own mean and
// variance, then scaled and shifted by its channel's. oneDNN 2.6 answers these with its generic
// ncsp batch normalization on one thread: a BiT/NF-ResNet's 49 GroupNorms over [1, 32, 25088]
// took 13.2 ms (ONNX Runtime 4.7 ms). Here rows are spread over the stream's threads and each is
// read three times while it sits in cache (sum, centred squares, affine map), the sums in double.
#include "kernels/dnnl/instance_norm_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/dnnl/affine_rows.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

// Sums in double lanes: a row of values near 1000 summed in float lanes lost its mean's fourth
// digit. Memory, not arithmetic, bounds these loops.
TROUPE_ISA_CLONES double row_sum(const float* x, int64_t n) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]);
  return s;
}

TROUPE_ISA_CLONES double row_centered_squares(const float* x, int64_t n, double mean) {
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean;
    s += d * d;
  }
  return s;
}

class InstanceNormRowsKernel final : public Kernel {
 public:
  explicit InstanceNormRowsKernel(const KernelRequest& r)
      : node_(r.node), epsilon_(r.node.attributes.get_float_or("epsilon", 1e-5)) {
    if (r.inputs.size() != 3 || r.outputs.size() != 1 || !all_f32(r) ||
        r.inputs[0].shape.rank() != 3 || !r.input_layout(0).is_plain() ||
        !r.output_layout(0).is_plain())
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:instance_norm_rows"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    const Tensor scale = in[1].contiguous(), bias = in[2].contiguous();
    const int64_t batch = x.shape()[0], channels = x.shape()[1], length = x.shape()[2];
    if (scale.size() != channels || bias.size() != channels)
      throw ExecutionError("InstanceNormalization node '" + node_.name + "': scale " +
                           scale.shape().to_string() + " and B " + bias.shape().to_string() +
                           " must hold one value per channel of " + x.shape().to_string());
    const float* src = x.data<float>();
    const float* gamma = scale.data<float>();
    const float* beta = bias.data<float>();
    float* dst = out[0].data<float>();
    const int64_t rows = batch * channels;
    if (length == 0) return;
    for_each_index_if(rows > 1 && rows * length > (int64_t{1} << 15), rows, [&](int64_t r) {
      const float* row = src + r * length;
      const double mean = row_sum(row, length) / static_cast<double>(length);
      const double variance = row_centered_squares(row, length, mean) / static_cast<double>(length);
      const double inv_std = 1.0 / std::sqrt(variance + epsilon_);
      const double a = gamma[r % channels] * inv_std;
      affine_row(row, dst + r * length, length, static_cast<float>(mean), static_cast<float>(a),
                 beta[r % channels], false);
    });
  }

 private:
  Node node_;
  double epsilon_;
};

}  // namespace

std::unique_ptr<Kernel> make_instance_norm_rows(const KernelRequest& request) {
  return construct_kernel<InstanceNormRowsKernel>(request);
}

}  // namespace troupe::kernels::onednn
