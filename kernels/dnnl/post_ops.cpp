#include "kernels/dnnl/post_ops.hpp"

#include <optional>

#include "engine/ops/fused_post_ops.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/eltwise_loop.hpp"

namespace troupe::kernels::onednn {

namespace {

struct Eltwise {
  dnnl::algorithm algorithm;
  float alpha = 0.f;
  float beta = 0.f;
};

// The oneDNN eltwise algorithm of a fused activation (engine/ops/fused_post_ops.hpp); nullopt for
// one oneDNN would compute differently.
std::optional<Eltwise> eltwise_of(const Node& node) {
  using alg = dnnl::algorithm;
  const std::string activation = fused::activation(node);
  if (activation == "Relu") return Eltwise{alg::eltwise_relu};
  if (activation == "LeakyRelu")
    return Eltwise{alg::eltwise_relu, static_cast<float>(fused::leaky_relu_alpha(node))};
  if (activation == "Sigmoid") return Eltwise{alg::eltwise_logistic};
  if (activation == "Tanh") return Eltwise{alg::eltwise_tanh};
  if (activation == "HardSwish") return Eltwise{alg::eltwise_hardswish};
  if (activation == "Swish")
    return Eltwise{alg::eltwise_swish, static_cast<float>(fused::swish_alpha(node))};
  if (activation == "Mish") return Eltwise{alg::eltwise_mish};
  if (activation == "Gelu") return Eltwise{alg::eltwise_gelu_erf};
  if (activation == "GeluTanh") return Eltwise{alg::eltwise_gelu_tanh};
  if (activation == "Clip") {
    const double lo = fused::clip_min(node);
    const double hi = fused::clip_max(node);
    // ONNX yields max everywhere when min > max; clip_v2 would yield min below it.
    if (lo > hi) return std::nullopt;
    return Eltwise{alg::eltwise_clip_v2, static_cast<float>(lo), static_cast<float>(hi)};
  }
  return std::nullopt;
}

}  // namespace

bool supports_fused_activation(const Node& node) {
  return fused::activation(node).empty() || eltwise_of(node).has_value();
}

void append_fused_activation(const Node& node, dnnl::post_ops& ops, float scale) {
  if (fused::activation(node).empty()) return;
  const std::optional<Eltwise> e = eltwise_of(node);
  if (!e) throw Unsupported{};  // callers check supports_fused_activation first
  ops.append_eltwise(scale, e->algorithm, e->alpha, e->beta);
}

bool InPlaceActivation::prepare(const Node& node, const dnnl::memory::desc& desc) {
  eltwise_ = {};
  loop_elements_ = 0;
  const std::string activation = fused::activation(node);
  relu_ = activation == "Relu";
  if (activation.empty() || relu_) return true;
  const std::optional<Eltwise> e = eltwise_of(node);
  if (!e) return false;
  // f32 memory without padding (any layout: the op is element-wise), of an activation troupe's
  // loop computes faster than oneDNN's JIT: the loop, in place.
  int64_t elements = 1;
  for (const int64_t d : desc.dims()) elements *= d;
  if (loop_outruns_jit(e->algorithm) && desc.data_type() == dnnl::memory::data_type::f32 &&
      desc.get_size() == static_cast<size_t>(elements) * sizeof(float)) {
    loop_algorithm_ = e->algorithm;
    loop_alpha_ = e->alpha;
    loop_beta_ = e->beta;
    loop_elements_ = elements;
    return true;
  }
  const dnnl::eltwise_forward::primitive_desc pd(
      {dnnl::prop_kind::forward_inference, e->algorithm, desc, e->alpha, e->beta}, cpu_engine());
  if (is_reference(pd)) return false;
  eltwise_ = dnnl::eltwise_forward(pd);
  data_ = unbound_memory(desc);
  return true;
}

void InPlaceActivation::run(float* data, const dnnl::stream& stream) {
  if (loop_elements_ > 0) {
    run_eltwise_loop(loop_algorithm_, loop_alpha_, loop_beta_, false, data, data, loop_elements_);
    return;
  }
  if (!eltwise_) return;
  data_.set_data_handle(data);
  eltwise_.execute(stream, {{DNNL_ARG_SRC, data_}, {DNNL_ARG_DST, data_}});
}

}  // namespace troupe::kernels::onednn
