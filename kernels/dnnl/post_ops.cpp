#include "kernels/dnnl/post_ops.hpp"

#include "engine/ops/fused_post_ops.hpp"

namespace troupe::kernels::onednn {

bool supports_fused_activation(const Node& node) {
  const std::string activation = fused::activation(node);
  return activation.empty() || activation == "Relu";
}

void append_fused_activation(const Node& node, dnnl::post_ops& ops) {
  if (fused::activation(node) == "Relu")
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
}

}  // namespace troupe::kernels::onednn
