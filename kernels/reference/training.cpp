// Reference kernels of the optimizers of ONNX domain "ai.onnx.preview.training" (opset 1):
// Adagrad, Momentum and Adam, following the numpy references of the ONNX backend tests
// (onnx/backend/test/case/node/{adagrad,momentum,adam}.py) step by step. Inputs are R (learning
// rate), T (update count), then n X, n G and n of each state; outputs the n new X, then the n new
// values of each state (engine/ops/training.cpp). Each element is updated on its own, computed in
// double.

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops/op_schema.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

// The one value of R or T.
double single_value(const Node& node, const Tensor& t, const std::string& what) {
  if (t.size() != 1)
    fail(node, what + " has shape " + t.shape().to_string() + ", expected a single value");
  return t.value_at(0);
}

void write(const Node& node, Tensor& out, const std::vector<double>& values) {
  require_output_size(node, out, static_cast<int64_t>(values.size()));
  dispatch_floating(node, out.element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* data = out.data<T>();
    for (size_t i = 0; i < values.size(); ++i) data[i] = store<T>(values[i]);
  });
}

// Splits the inputs into n groups of X, G and `states` states, updates every element with
// `update(r, t, x, g, states)` (which returns the new x and updates the element's states in
// place), and writes the outputs that are present (trailing ones may be left off).
template <class Update>
void update_tensors(const Node& node, const Tensors& in, Tensors& out, size_t states,
                    Update&& update) {
  const size_t per_tensor = 2 + states;
  if (in.size() < 2 + per_tensor || (in.size() - 2) % per_tensor != 0)
    fail(node, "expected 2 + " + std::to_string(per_tensor) + "n inputs, got " +
                   std::to_string(in.size()));
  const size_t n = (in.size() - 2) / per_tensor;
  const double r = single_value(node, in[0], "input 0 (R)");
  if (in[1].element_type() != ElementType::i64)
    unsupported_type(node, in[1].element_type(), "i64", "input 1 (T)");
  single_value(node, in[1], "input 1 (T)");
  const int64_t t = in[1].data<int64_t>()[0];
  for (size_t k = 0; k < n; ++k) {
    const std::vector<double> x = floating_values(node, in[2 + k]);
    const std::vector<double> g = floating_values(node, in[2 + n + k]);
    std::vector<std::vector<double>> state(states);
    for (size_t s = 0; s < states; ++s) state[s] = floating_values(node, in[2 + (2 + s) * n + k]);
    bool same_size = g.size() == x.size();
    for (size_t s = 0; s < states; ++s) same_size = same_size && state[s].size() == x.size();
    if (!same_size)
      fail(node, "the inputs of tensor " + std::to_string(k) +
                     " (its X, G and states) differ in size; X has " + std::to_string(x.size()) +
                     " elements");
    std::vector<double> x_new(x.size());
    std::vector<double> element_states(states);
    for (size_t i = 0; i < x.size(); ++i) {
      for (size_t s = 0; s < states; ++s) element_states[s] = state[s][i];
      x_new[i] = update(r, t, x[i], g[i], element_states);
      for (size_t s = 0; s < states; ++s) state[s][i] = element_states[s];
    }
    if (k < out.size()) write(node, out[k], x_new);
    for (size_t s = 0; s < states; ++s)
      if ((1 + s) * n + k < out.size()) write(node, out[(1 + s) * n + k], state[s]);
  }
}

// Adagrad: the learning rate decays with T; H accumulates the squared (regularized) gradients.
void adagrad(const Node& node, const Tensors& in, Tensors& out) {
  const double norm_coefficient = node.attributes.get_float_or("norm_coefficient", 0.0);
  const double epsilon = node.attributes.get_float_or("epsilon", 1e-6);
  const double decay_factor = node.attributes.get_float_or("decay_factor", 0.0);
  update_tensors(node, in, out, 1,
                 [&](double r, int64_t t, double x, double g, std::vector<double>& states) {
                   const double r_adjusted = r / (1 + static_cast<double>(t) * decay_factor);
                   const double g_regularized = norm_coefficient * x + g;
                   double& h = states[0];
                   h = h + g_regularized * g_regularized;
                   const double h_sqrt = std::sqrt(h) + epsilon;
                   return x - r_adjusted * g_regularized / h_sqrt;
                 });
}

// Momentum (standard or Nesterov): the gradient's coefficient beta is 1 at the first update (T=0).
void momentum(const Node& node, const Tensors& in, Tensors& out) {
  const double norm_coefficient = node.attributes.get_float("norm_coefficient");
  const double alpha = node.attributes.get_float("alpha");
  const double beta = node.attributes.get_float("beta");
  const std::string mode = node.attributes.get_string("mode");
  if (mode != "standard" && mode != "nesterov")
    fail(node, "attribute mode is '" + mode + "', expected standard or nesterov");
  const bool nesterov = mode == "nesterov";
  update_tensors(node, in, out, 1,
                 [&](double r, int64_t t, double x, double g, std::vector<double>& states) {
                   const double g_regularized = norm_coefficient * x + g;
                   const double beta_adjusted = t > 0 ? beta : 1.0;
                   double& v = states[0];
                   v = alpha * v + beta_adjusted * g_regularized;
                   return nesterov ? x - r * (g_regularized + alpha * v) : x - r * v;
                 });
}

// Adam: V and H are the first and second moments; from T=1 on the learning rate corrects their
// bias; norm_coefficient_post shrinks the result.
void adam(const Node& node, const Tensors& in, Tensors& out) {
  const double norm_coefficient = node.attributes.get_float_or("norm_coefficient", 0.0);
  const double norm_coefficient_post = node.attributes.get_float_or("norm_coefficient_post", 0.0);
  const double alpha = node.attributes.get_float_or("alpha", 0.9);
  const double beta = node.attributes.get_float_or("beta", 0.999);
  const double epsilon = node.attributes.get_float_or("epsilon", 1e-6);
  update_tensors(
      node, in, out, 2, [&](double r, int64_t t, double x, double g, std::vector<double>& states) {
        const double g_regularized = norm_coefficient * x + g;
        double& v = states[0];
        double& h = states[1];
        v = alpha * v + (1 - alpha) * g_regularized;
        h = beta * h + (1 - beta) * (g_regularized * g_regularized);
        const double h_sqrt = std::sqrt(h) + epsilon;
        double r_adjusted = r;
        if (t > 0) {
          const auto steps = static_cast<double>(t);
          r_adjusted = r * std::sqrt(1 - std::pow(beta, steps)) / (1 - std::pow(alpha, steps));
        }
        const double x_new = x - r_adjusted * (v / h_sqrt);
        return (1 - norm_coefficient_post) * x_new;
      });
}

}  // namespace

void register_training(KernelRegistry& registry) {
  const std::pair<const char*, ReferenceFn> kernels[] = {
      {"Adagrad", &adagrad}, {"Momentum", &momentum}, {"Adam", &adam}};
  for (const auto& [op, fn] : kernels)
    registry.add("reference", 0, qualified_op_type(onnx_training_domain, op),
                 [fn = fn](const KernelRequest& r) { return make_reference_kernel(r.node, fn); });
}

}  // namespace troupe::kernels::reference
