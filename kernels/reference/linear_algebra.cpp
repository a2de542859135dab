// Reference kernels of the matrix products: MatMul (numpy matmul: 1-D operands are promoted to
// matrices, leading dimensions broadcast) and Gemm (Y = alpha * A' * B' + beta * C).

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/reference/broadcast.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/fused_post_ops.hpp"
#include "kernels/reference/linear_algebra.hpp"
#include "kernels/reference/reference.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

// numpy broadcast of two batch shapes.
Shape broadcast_batch(const Node& node, const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da != db && da != 1 && db != 1)
      fail(node,
           "batch dimensions " + a.to_string() + " and " + b.to_string() + " do not broadcast");
    dims[i] = da == 1 ? db : da;
  }
  return Shape(std::move(dims));
}

}  // namespace

void matmul(const Node& node, const Tensors& in, Tensors& out) {
  if (in[0].element_type() != in[1].element_type())
    fail(node, "input types " + std::string(to_string(in[0].element_type())) + " and " +
                   std::string(to_string(in[1].element_type())) + " differ");
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // A 1-D A is a row vector [1,K]; a 1-D B is a column vector [K,1].
    std::vector<int64_t> a_dims = in[0].shape().dims();
    std::vector<int64_t> b_dims = in[1].shape().dims();
    if (a_dims.empty() || b_dims.empty()) fail(node, "inputs must have rank >= 1");
    if (a_dims.size() == 1) a_dims.insert(a_dims.begin(), 1);
    if (b_dims.size() == 1) b_dims.push_back(1);
    const int64_t m = a_dims[a_dims.size() - 2];
    const int64_t k_size = a_dims[a_dims.size() - 1];
    const int64_t n = b_dims[b_dims.size() - 1];
    if (b_dims[b_dims.size() - 2] != k_size)
      fail(node, "inner dimensions of " + in[0].shape().to_string() + " and " +
                     in[1].shape().to_string() + " differ");

    const Shape a_batch(std::vector<int64_t>(a_dims.begin(), a_dims.end() - 2));
    const Shape b_batch(std::vector<int64_t>(b_dims.begin(), b_dims.end() - 2));
    const Shape batch = broadcast_batch(node, a_batch, b_batch);
    const int64_t batches = element_count(batch.dims());
    if (out[0].size() != batches * m * n)
      fail(node, "output shape " + out[0].shape().to_string() + " does not fit the inputs " +
                     in[0].shape().to_string() + " and " + in[1].shape().to_string());

    const T* a = in[0].data<T>();
    const T* b = in[1].data<T>();
    T* y = out[0].data<T>();
    // The walker yields, per output batch entry, the index of the A and B matrices it uses.
    BroadcastWalker walk(node, batch, {a_batch, b_batch});
    for (int64_t p = 0; p < batches; ++p, walk.next()) {
      const T* a_mat = a + walk.offset(0) * m * k_size;
      const T* b_mat = b + walk.offset(1) * k_size * n;
      T* y_mat = y + p * m * n;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          compute_t<T> acc = 0;
          for (int64_t k = 0; k < k_size; ++k)
            acc += load(a_mat[i * k_size + k]) * load(b_mat[k * n + j]);
          y_mat[i * n + j] = store<T>(acc);
        }
      }
    }
  });
  apply_fused_post_ops(node, in, out[0]);
}

namespace {

void gemm(const Node& node, const Tensors& in, Tensors& out) {
  const bool has_c = in.size() > 2 && !in[2].empty();
  for (size_t i = 1; i < (has_c ? 3u : 2u); ++i)
    if (in[i].element_type() != in[0].element_type())
      fail(node, "input " + std::to_string(i) + " has element type " +
                     std::string(to_string(in[i].element_type())) + " but A has " +
                     std::string(to_string(in[0].element_type())));
  const double alpha = node.attributes.get_float_or("alpha", 1.0);
  const double beta = node.attributes.get_float_or("beta", 1.0);
  const bool trans_a = node.attributes.get_int_or("transA", 0) != 0;
  const bool trans_b = node.attributes.get_int_or("transB", 0) != 0;
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Shape& a_shape = in[0].shape();
    const Shape& b_shape = in[1].shape();
    if (a_shape.rank() != 2 || b_shape.rank() != 2)
      fail(node,
           "A and B must be matrices, got " + a_shape.to_string() + " and " + b_shape.to_string());
    const int64_t m = trans_a ? a_shape[1] : a_shape[0];
    const int64_t k_size = trans_a ? a_shape[0] : a_shape[1];
    const int64_t n = trans_b ? b_shape[0] : b_shape[1];
    if ((trans_b ? b_shape[1] : b_shape[0]) != k_size)
      fail(node, "inner dimensions of A " + a_shape.to_string() + " and B " + b_shape.to_string() +
                     " differ");
    if (out[0].shape() != Shape{m, n})
      fail(node, "output shape " + out[0].shape().to_string() +
                     " is not [M,N] = " + Shape{m, n}.to_string());

    const T* a = in[0].data<T>();
    const T* b = in[1].data<T>();
    T* y = out[0].data<T>();
    // A(i,k) and B(k,j) read through the transposition flags.
    auto a_at = [&](int64_t i, int64_t k) {
      return load(trans_a ? a[k * m + i] : a[i * k_size + k]);
    };
    auto b_at = [&](int64_t k, int64_t j) {
      return load(trans_b ? b[j * k_size + k] : b[k * n + j]);
    };
    // C (optional) broadcasts to [M,N].
    const T* c = has_c ? in[2].data<T>() : nullptr;
    BroadcastWalker walk(node, out[0].shape(),
                         has_c ? std::vector<Shape>{in[2].shape()} : std::vector<Shape>{});
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j, walk.next()) {
        compute_t<T> acc = 0;
        for (int64_t k = 0; k < k_size; ++k) acc += a_at(i, k) * b_at(k, j);
        double result = alpha * static_cast<double>(acc);
        if (has_c) result += beta * static_cast<double>(load(c[walk.offset(0)]));
        y[i * n + j] = store<T>(result);
      }
    }
  });
  apply_fused_post_ops(node, in, out[0]);
}

}  // namespace

void register_linear_algebra(KernelRegistry& registry) {
  registry.add("reference", 0, "MatMul",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &matmul); });
  registry.add("reference", 0, "Gemm",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &gemm); });
}

}  // namespace troupe::kernels::reference
