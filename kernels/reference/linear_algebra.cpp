// Reference kernels of the matrix products: MatMul (numpy matmul: 1-D operands are promoted to
// matrices, leading dimensions broadcast), Gemm (Y = alpha * A' * B' + beta * C) and Einsum; and
// Det.

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "engine/ops/einsum.hpp"
#include "engine/ops/fused_post_ops.hpp"
#include "kernels/reference/broadcast.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/fused_post_ops.hpp"
#include "kernels/reference/linear_algebra.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/transpose.hpp"

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
  if (fused::transposes_b(node)) {
    // The specification: the Transpose of B's last two axes the graph compiler absorbed, then
    // the product.
    const size_t rank = in[1].shape().rank();
    if (rank < 2) fail(node, "fused_transpose_b needs B of rank >= 2");
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::swap(perm[rank - 2], perm[rank - 1]);
    Node swap_axes{node.name, "Transpose", {}, {}, {}};
    swap_axes.attributes.set("perm", perm);
    std::vector<int64_t> dims = in[1].shape().dims();
    std::swap(dims[rank - 2], dims[rank - 1]);
    Tensors operands = in;
    Tensors swapped = {Tensor(in[1].element_type(), Shape(dims))};
    transpose(swap_axes, {in[1]}, swapped);
    operands[1] = swapped[0];
    Node plain = node;
    plain.attributes.set("fused_transpose_b", int64_t{0});
    return matmul(plain, operands, out);
  }
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

// Einsum, by definition: for every output index and every combination of the summed labels, the
// product of the inputs' elements those labels address, accumulated in double (int64 for
// integers). A label repeated within an input walks its diagonal; a '...' dimension of size 1
// broadcasts.
void einsum_op(const Node& node, const Tensors& in, Tensors& out) {
  const std::string equation = node.attributes.get_string("equation");
  std::vector<size_t> ranks;
  for (const Tensor& t : in) {
    if (t.element_type() != in[0].element_type())
      fail(node, "the inputs must share an element type");
    ranks.push_back(t.shape().rank());
  }
  const einsum::Equation eq = einsum::parse(equation, ranks);
  if (!eq.error.empty()) fail(node, eq.error);

  const size_t labels = einsum::ellipsis_label + eq.ellipsis_rank;
  std::vector<int64_t> size(labels, -1);
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t d = 0; d < ranks[i]; ++d) {
      const auto label = static_cast<size_t>(eq.inputs[i][d]);
      const int64_t dim = in[i].shape()[d];
      const bool broadcasts = label >= einsum::ellipsis_label && (dim == 1 || size[label] == 1);
      if (size[label] == -1 || (broadcasts && dim != 1))
        size[label] = dim;
      else if (dim != size[label] && !broadcasts)
        fail(node, "label '" + einsum::label_name(static_cast<int>(label)) + "' has size " +
                       std::to_string(size[label]) + " and " + std::to_string(dim));
    }
  }
  // Per input, the step its flat offset takes per unit of each label (0 for a label it lacks or
  // broadcasts; the sum of strides for a repeated one).
  std::vector<std::vector<int64_t>> steps(in.size(), std::vector<int64_t>(labels, 0));
  for (size_t i = 0; i < in.size(); ++i) {
    const std::vector<int64_t> strides = dense_strides(in[i].shape().dims());
    for (size_t d = 0; d < ranks[i]; ++d)
      if (in[i].shape()[d] != 1 || size[static_cast<size_t>(eq.inputs[i][d])] == 1)
        steps[i][static_cast<size_t>(eq.inputs[i][d])] += strides[d];
  }
  std::vector<int> summed;
  std::vector<int64_t> out_dims, summed_dims;
  for (int label : eq.output) out_dims.push_back(size[static_cast<size_t>(label)]);
  for (size_t label = 0; label < labels; ++label)
    if (size[label] != -1 &&
        std::find(eq.output.begin(), eq.output.end(), static_cast<int>(label)) == eq.output.end()) {
      summed.push_back(static_cast<int>(label));
      summed_dims.push_back(size[label]);
    }
  if (out[0].shape().dims() != out_dims)
    fail(node, "output shape " + out[0].shape().to_string() + " is not " +
                   Shape(out_dims).to_string() + " for equation '" + equation + "'");
  if (out[0].element_type() != in[0].element_type())
    fail(node, "output element type differs from the inputs'");

  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t sum_count = element_count(summed_dims);
    for (int64_t flat = 0; flat < out[0].size(); ++flat) {
      const std::vector<int64_t> out_index = unravel(flat, out_dims);
      std::vector<int64_t> base(in.size(), 0);
      for (size_t i = 0; i < in.size(); ++i)
        for (size_t d = 0; d < out_index.size(); ++d)
          base[i] += out_index[d] * steps[i][static_cast<size_t>(eq.output[d])];
      compute_t<T> acc = 0;
      for (int64_t s = 0; s < sum_count; ++s) {
        const std::vector<int64_t> sum_index = unravel(s, summed_dims);
        compute_t<T> product = 1;
        for (size_t i = 0; i < in.size(); ++i) {
          int64_t offset = base[i];
          for (size_t d = 0; d < sum_index.size(); ++d)
            offset += sum_index[d] * steps[i][static_cast<size_t>(summed[d])];
          product *= load(in[i].data<T>()[offset]);
        }
        acc += product;
      }
      out[0].data<T>()[flat] = store<T>(acc);
    }
  });
}

// Det: per [M, M] matrix, the product of the pivots of its LU decomposition with partial pivoting
// (in double), negated per row swap. A matrix of size 0 has determinant 1, as numpy's.
void det(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& dims = in[0].shape().dims();
  if (dims.size() < 2 || dims[dims.size() - 1] != dims[dims.size() - 2])
    fail(node, "input must be a batch of square matrices, got shape " + in[0].shape().to_string());
  const int64_t m = dims.back();
  const int64_t matrices = element_count(std::vector<int64_t>(dims.begin(), dims.end() - 2));
  require_output_size(node, out[0], matrices);
  dispatch_floating(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    std::vector<double> a(static_cast<size_t>(m * m));
    for (int64_t b = 0; b < matrices; ++b) {
      for (size_t k = 0; k < a.size(); ++k) a[k] = load(x[b * m * m + static_cast<int64_t>(k)]);
      auto at = [&](int64_t r, int64_t c) -> double& { return a[static_cast<size_t>(r * m + c)]; };
      double d = 1;
      for (int64_t c = 0; c < m && d != 0; ++c) {
        int64_t pivot = c;
        for (int64_t r = c + 1; r < m; ++r)
          if (std::abs(at(r, c)) > std::abs(at(pivot, c))) pivot = r;
        if (at(pivot, c) == 0) {
          d = 0;
          break;
        }
        if (pivot != c) {
          for (int64_t k = 0; k < m; ++k) std::swap(at(pivot, k), at(c, k));
          d = -d;
        }
        d *= at(c, c);
        for (int64_t r = c + 1; r < m; ++r) {
          const double f = at(r, c) / at(c, c);
          for (int64_t k = c; k < m; ++k) at(r, k) -= f * at(c, k);
        }
      }
      y[b] = store<T>(d);
    }
  });
}

}  // namespace

void register_linear_algebra(KernelRegistry& registry) {
  registry.add("reference", 0, "MatMul",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &matmul); });
  registry.add("reference", 0, "Gemm",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &gemm); });
  registry.add("reference", 0, "Einsum",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &einsum_op); });
  registry.add("reference", 0, "Det",
               [](const KernelRequest& r) { return make_reference_kernel(r.node, &det); });
}

}  // namespace troupe::kernels::reference
