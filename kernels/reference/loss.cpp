// Reference kernels of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ONNX opset 12/13).
// Scores are [N, C, d1, ..., dk], targets [N, d1, ..., dk]; each position's loss is minus its
// target class's (log-)score, times that class's weight. A target equal to `ignore_index` adds
// nothing and weighs nothing. Reduction "mean" divides by the total weight of the positions that
// count (their number when there is no weight and no ignore_index).

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

// log_prob [N, C, D] (D = d1 * ... * dk) against targets [N, D] into out[0].
template <class T>
void negative_log_likelihood(const Node& node, const std::vector<double>& log_prob,
                             const std::vector<int64_t>& dims, const Tensors& in, Tensor& out) {
  const int64_t n = dims[0];
  const int64_t classes = dims[1];
  const int64_t positions = element_count(dims) / (n * classes);
  const std::vector<int64_t> target = read_ints(node, in[1], "target");
  if (static_cast<int64_t>(target.size()) != n * positions)
    fail(node, "target has " + std::to_string(target.size()) + " elements, expected " +
                   std::to_string(n * positions));
  std::optional<int64_t> ignore_index;
  if (node.attributes.has("ignore_index")) ignore_index = node.attributes.get_int("ignore_index");
  const bool weighted = in.size() > 2 && !in[2].empty();
  std::vector<double> weight;
  if (weighted) {
    dispatch_floating(node, in[2].element_type(), [&](auto tag) {
      using W = typename decltype(tag)::type;
      const W* w = in[2].data<W>();
      for (int64_t c = 0; c < in[2].size(); ++c) weight.push_back(load(w[c]));
    });
    if (static_cast<int64_t>(weight.size()) != classes)
      fail(node, "weight has " + std::to_string(weight.size()) + " elements, expected one per " +
                     "class (" + std::to_string(classes) + ")");
  }

  std::vector<double> loss(static_cast<size_t>(n * positions));
  double total_weight = 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < positions; ++d) {
      const auto at = static_cast<size_t>(i * positions + d);
      const int64_t t = target[at];
      if (ignore_index && t == *ignore_index) continue;
      if (t < 0 || t >= classes)
        fail(node, "target " + std::to_string(t) + " at flat index " + std::to_string(at) +
                       " is not a class index in [0, " + std::to_string(classes) + ")" +
                       (ignore_index ? "" : " and no ignore_index is set"));
      const double w = weighted ? weight[static_cast<size_t>(t)] : 1.0;
      loss[at] = -log_prob[static_cast<size_t>((i * classes + t) * positions + d)] * w;
      total_weight += w;
    }

  const std::string reduction = node.attributes.get_string_or("reduction", "mean");
  T* y = out.data<T>();
  if (reduction == "none") {
    require_output_size(node, out, static_cast<int64_t>(loss.size()));
    for (size_t k = 0; k < loss.size(); ++k) y[k] = store<T>(loss[k]);
    return;
  }
  require_output_size(node, out, 1);
  double sum = 0;
  for (double l : loss) sum += l;
  if (reduction == "sum")
    y[0] = store<T>(sum);
  else if (weighted || ignore_index)
    y[0] = store<T>(sum / total_weight);
  else
    y[0] = store<T>(sum / static_cast<double>(loss.size()));
}

void negative_log_likelihood_loss(const Node& node, const Tensors& in, Tensors& out) {
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in[0].data<T>();
    std::vector<double> log_prob(static_cast<size_t>(in[0].size()));
    for (size_t k = 0; k < log_prob.size(); ++k) log_prob[k] = load(x[k]);
    negative_log_likelihood<T>(node, log_prob, in[0].shape().dims(), in, out[0]);
  });
}

// The log-softmax over the class axis (the optional second output), then the NLL loss of it.
void softmax_cross_entropy_loss(const Node& node, const Tensors& in, Tensors& out) {
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const std::vector<int64_t>& dims = in[0].shape().dims();
    const int64_t n = dims[0];
    const int64_t classes = dims[1];
    const int64_t positions = in[0].size() / (n * classes);
    const T* x = in[0].data<T>();
    std::vector<double> log_prob(static_cast<size_t>(in[0].size()));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < positions; ++d) {
        const int64_t base = i * classes * positions + d;
        double max = load(x[base]);
        for (int64_t c = 1; c < classes; ++c) max = std::max(max, load(x[base + c * positions]));
        double sum = 0;
        for (int64_t c = 0; c < classes; ++c) sum += std::exp(load(x[base + c * positions]) - max);
        const double log_sum = std::log(sum);
        for (int64_t c = 0; c < classes; ++c) {
          const auto at = static_cast<size_t>(base + c * positions);
          log_prob[at] = load(x[at]) - max - log_sum;
        }
      }
    negative_log_likelihood<T>(node, log_prob, dims, in, out[0]);
    if (out.size() > 1 && !out[1].empty()) {
      require_output_size(node, out[1], in[0].size());
      T* y = out[1].data<T>();
      for (size_t k = 0; k < log_prob.size(); ++k) y[k] = store<T>(log_prob[k]);
    }
  });
}

}  // namespace

void register_loss(KernelRegistry& registry) {
  const std::pair<const char*, ReferenceFn> kernels[] = {
      {"NegativeLogLikelihoodLoss", &negative_log_likelihood_loss},
      {"SoftmaxCrossEntropyLoss", &softmax_cross_entropy_loss}};
  for (const auto& [op_type, fn] : kernels)
    registry.add("reference", 0, op_type,
                 [fn = fn](const KernelRequest& r) { return make_reference_kernel(r.node, fn); });
}

}  // namespace troupe::kernels::reference
