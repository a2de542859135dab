// Inference-mode BatchNormalization of a plain f32 tensor [N, C, D...] of rank 2 to 5: each of
// the N x C rows of D... values is one affine map with its channel's (x - mean) * a + beta,
// a = scale / sqrt(variance + epsilon), and the Relu the graph compiler may have fused. oneDNN
// 2.6 answers a 3-D one with its reference kernel (an ECAPA-TDNN's 31 normalizations over
// [1, 1024, 300] took 27 ms, ONNX Runtime's 1.4 ms) and plain 2-D, 4-D and 5-D ones with its
// unvectorized ncsp kernel. A 4-D one is offered to oneDNN while layouts are chosen (its jit
// kernels read the model's activation layout) and comes here only where it stayed plain
// (CondenseNet's normalizations before a Gather of channels: 188 us each on ncsp).
#include "kernels/dnnl/batch_norm_rows.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/ops/fused_post_ops.hpp"
#include "kernels/dnnl/affine_rows.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/dnnl/vector_exp.hpp"  // TROUPE_ISA_CLONES
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

// Rows of one value (BatchNorm1d over [N, C]): each sample's C values against the channel
// vectors.
TROUPE_ISA_CLONES void affine_channels(const float* x, float* y, int64_t channels,
                                       const float* mean, const float* a, const float* beta,
                                       bool relu) {
  for (int64_t c = 0; c < channels; ++c) {
    const float v = (x[c] - mean[c]) * a[c] + beta[c];
    y[c] = relu && v < 0.f ? 0.f : v;
  }
}

class BatchNormRowsKernel final : public Kernel {
 public:
  explicit BatchNormRowsKernel(const KernelRequest& r)
      : node_(r.node),
        epsilon_(r.node.attributes.get_float_or("epsilon", 1e-5)),
        relu_(fused::activation(r.node) == "Relu") {
    const size_t rank = r.inputs.empty() ? 0 : r.inputs[0].shape.rank();
    if (r.inputs.size() != 5 || present_outputs(r) != 1 || !all_f32(r) || rank < 2 || rank > 5 ||
        (rank == 4 && r.layout_probe) || !r.input_layout(0).is_plain() ||
        !r.output_layout(0).is_plain() || r.node.attributes.get_int_or("training_mode", 0) != 0 ||
        !(fused::activation(r.node).empty() || relu_))
      throw Unsupported{};
  }

  std::string implementation() const override { return "dnnl:batch_norm_rows"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const Tensor x = in[0].contiguous();
    const Shape& shape = x.shape();
    if (shape.rank() < 2)
      throw ExecutionError("BatchNormalization node '" + node_.name + "': X " + shape.to_string() +
                           " has no channel axis");
    const int64_t batch = shape[0], channels = shape[1];
    const int64_t length = channels == 0 || batch == 0 ? 0 : x.size() / (batch * channels);
    std::vector<Tensor> parameters;
    for (size_t i = 1; i < 5; ++i) {
      parameters.push_back(in[i].contiguous());
      if (parameters.back().size() != channels)
        throw ExecutionError("BatchNormalization node '" + node_.name + "': input " +
                             std::to_string(i) + " " + parameters.back().shape().to_string() +
                             " must hold one value per channel of X " + shape.to_string());
    }
    const float* gamma = parameters[0].data<float>();
    const float* beta = parameters[1].data<float>();
    const float* mean = parameters[2].data<float>();
    const float* variance = parameters[3].data<float>();
    a_.resize(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c)
      a_[c] = static_cast<float>(gamma[c] / std::sqrt(static_cast<double>(variance[c]) + epsilon_));
    const float* src = x.data<float>();
    float* dst = out[0].data<float>();
    const bool split = x.size() > (int64_t{1} << 15);
    if (length == 1) {
      for_each_index_if(split && batch > 1, batch, [&](int64_t n) {
        affine_channels(src + n * channels, dst + n * channels, channels, mean, a_.data(), beta,
                        relu_);
      });
      return;
    }
    const int64_t rows = batch * channels;
    for_each_index_if(split && rows > 1, rows, [&](int64_t r) {
      const int64_t c = r % channels;
      affine_row(src + r * length, dst + r * length, length, mean[c], a_[c], beta[c], relu_);
    });
  }

 private:
  Node node_;
  double epsilon_;
  bool relu_;
  std::vector<float> a_;
};

}  // namespace

std::unique_ptr<Kernel> make_batch_norm_rows(const KernelRequest& request) {
  return construct_kernel<BatchNormRowsKernel>(request);
}

}  // namespace troupe::kernels::onednn
