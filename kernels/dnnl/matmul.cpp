// MatMul (numpy semantics: 1-D operands promoted, batch dims broadcast) and Gemm (transposes as
// strides, alpha as output scale, C as bias or as a binary post-op) on oneDNN's matmul primitive.
// A constant right-hand side is packed once into the layout the primitive prefers; an f32
// product of one or two rows by a constant streams it (SmallRowsProduct: from a copy in panels
// of 64 columns), the fused activation applied after it; on
// AVX2 CPUs an f32 product of more rows by a constant 2-D one wider than deep runs on troupe's
// packed GEMM (PackedProduct).
#include <algorithm>

#include "engine/ops/fused_post_ops.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/packed_gemm_avx2.hpp"
#include "kernels/dnnl/post_ops.hpp"
#include "kernels/dnnl/small_rows_product.hpp"

namespace troupe::kernels::onednn {

namespace {

// `dims` with the last two dimensions swapped in memory: B stored as [N, K] row-major (per batch
// entry), the "transposed B" of a GEMM.
dnnl::memory::desc transposed_f32(const Dims& dims) {
  const size_t rank = dims.size();
  Dims strides(rank);
  strides[rank - 2] = 1;
  strides[rank - 1] = std::max<int64_t>(dims[rank - 2], 1);
  int64_t stride = strides[rank - 1] * std::max<int64_t>(dims[rank - 1], 1);
  for (size_t i = rank - 2; i-- > 0;) {
    strides[i] = stride;
    stride *= std::max<int64_t>(dims[i], 1);
  }
  return dnnl::memory::desc(dims, dnnl::memory::data_type::f32, strides);
}

int64_t product(const Dims& dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// Whether the primitive chose the plain row-major layout for B: the GEMM-based implementation does
// for format "any" (blocked implementations choose their own).
bool plain_weights(const dnnl::matmul::primitive_desc& pd) {
  const dnnl::memory::desc w = pd.weights_desc();
  return w == plain_f32(w.dims());
}

// The primitive and its operands, shared by MatMul and Gemm.
struct MatmulCore {
  Primitive primitive;
  LayoutBridge src;  // f32 A, converted when the primitive reads bf16
  PackedWeights weights;
  dnnl::memory dst;
  dnnl::memory bias;
  dnnl::memory post_src;  // Gemm's C as a binary post-op operand
  bool with_bias = false;
  bool with_post_src = false;
  std::unordered_map<int, dnnl::memory> args;

  // Creates the primitive computing in `type` (f32, or bf16 A and B with an f32 result), or in f32
  // where oneDNN has no bf16 implementation for it. Returns the primitive descriptor (for its
  // implementation name).
  dnnl::matmul::primitive_desc build(dnnl::memory::data_type type, const dnnl::memory::desc& src_md,
                                     const dnnl::memory::desc& weights_md,
                                     const Tensor* constant_weights,
                                     const dnnl::memory::desc& dst_md,
                                     const dnnl::memory::desc* bias_md,
                                     const dnnl::primitive_attr& attr,
                                     const dnnl::memory::desc* post_src_md,
                                     const dnnl::stream& stream) {
    const dnnl::matmul::primitive_desc pd = create_in(type, [&](dnnl::memory::data_type t) {
      return choose(with_type(src_md, t), weights_md, t, constant_weights, dst_md, bias_md, attr);
    });
    primitive = Primitive::of<dnnl::matmul>(pd);
    src = LayoutBridge(src_md, pd.src_desc(), 0);
    weights = PackedWeights(weights_md, pd.weights_desc(), constant_weights, stream);
    dst = unbound_memory(dst_md);
    with_bias = bias_md != nullptr;
    if (with_bias) bias = unbound_memory(*bias_md);
    with_post_src = post_src_md != nullptr;
    if (with_post_src) post_src = unbound_memory(*post_src_md);
    args = {{DNNL_ARG_DST, dst}};
    if (with_bias) args[DNNL_ARG_BIAS] = bias;
    if (with_post_src) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1] = post_src;
    return pd;
  }

  void run(const Tensor& a, const Tensor& b, const Tensor* c, Tensor& y,
           const dnnl::stream& stream) {
    args[DNNL_ARG_SRC] = src.to_internal(a, stream);
    args[DNNL_ARG_WEIGHTS] = weights.get(b, stream);
    bind(dst, y);
    if (with_bias) bind(bias, *c);
    if (with_post_src) bind(post_src, *c);
    primitive.execute(stream, args);
  }

 private:
  // The primitive descriptor for A as `src_md`, with B's layout chosen by the primitive when B is
  // a constant (packed once), else B as given (converted to `type` on every run).
  static dnnl::matmul::primitive_desc choose(const dnnl::memory::desc& src_md,
                                             const dnnl::memory::desc& weights_md,
                                             dnnl::memory::data_type type,
                                             const Tensor* constant_weights,
                                             const dnnl::memory::desc& dst_md,
                                             const dnnl::memory::desc* bias_md,
                                             const dnnl::primitive_attr& attr) {
    auto make_pd = [&](const dnnl::memory::desc& w) {
      dnnl::matmul::desc desc = bias_md ? dnnl::matmul::desc(src_md, w, *bias_md, dst_md)
                                        : dnnl::matmul::desc(src_md, w, dst_md);
      return dnnl::matmul::primitive_desc(desc, attr, cpu_engine());
    };
    const auto f32 = dnnl::memory::data_type::f32;
    if (constant_weights) {
      dnnl::matmul::primitive_desc pd;
      try {
        pd = make_pd(dnnl::memory::desc(weights_md.dims(), type, dnnl::memory::format_tag::any));
      } catch (const dnnl::error&) {
        // some broadcast patterns have no implementation with a chosen weights layout
        return make_pd(with_type(weights_md, type));
      }
      // Where "any" means plain row-major (oneDNN's gemm:jit, the f32 matmul without AVX-512),
      // the same primitive runs faster on a wide B (N > K) stored transposed once there are
      // enough rows: measured with oneDNN 2.6 on AVX2, 128x768x3072 went from 55-68 to 91-165
      // GFLOP/s (32x256x512: 87 -> 100-113), while on narrow ones it was mixed (32x2048x1000:
      // 20% slower). Constant weights are reordered into it once.
      const Dims w = weights_md.dims();
      const Dims a = src_md.dims();
      const int64_t k = w[w.size() - 2];
      const int64_t n = w[w.size() - 1];
      const int64_t rows = a.back() > 0 ? product(a) / a.back() : 0;
      if (type == f32 && plain_weights(pd) && n > k && rows >= 32) {
        try {
          return make_pd(transposed_f32(weights_md.dims()));
        } catch (const dnnl::error&) {
          // keep the plain layout
        }
      }
      return pd;
    }
    // B given at run time in another order than row-major (read transposed: "fused_transpose_b")
    // where oneDNN has only its reference kernel for that order: the primitive takes it
    // row-major, and the weights' reorder copies it so on every run (what the Transpose did).
    dnnl::matmul::primitive_desc pd = make_pd(with_type(weights_md, type));
    if (is_reference(pd) && weights_md != plain_f32(weights_md.dims()))
      pd = unless_reference(pd,
                            [&] { return make_pd(with_type(plain_f32(weights_md.dims()), type)); });
    return pd;
  }
};

// y = act(scale * (A B + bias) [+ y]) for a row-major f32 A and a constant 2-D B, on troupe's
// AVX2 GEMM (packed_gemm_avx2.hpp): B packed once by a oneDNN reorder into its panels, shared
// between streams like the primitive's packed weights, and restorable from them.
struct PackedProduct {
  int64_t m = 0, k = 0, n = 0;
  PackedWeights weights;
  Avx2PackedGemm::Epilogue epilogue;
  InPlaceActivation activation;  // ReLU in the epilogue, others after it

  // Whether it runs this product: AVX2 without AVX-512, f32, a constant B whose layout `b_md`
  // describes ([K, N], strided when stored transposed), wider than deep. `accumulate`: y holds
  // values to add (a residual; only with scale 1, which then also applies to them).
  // Wide B only: there oneDNN's sgemm was slowest (on one Zen 3 core, 197x768x3072 at 30-32
  // GFLOP/s with B plain, 43-48 stored transposed, 59-62 packed here); at N <= K it reached
  // 52-62 and the packed GEMM was within noise of it (BERT's 768x768 and 3072x768: 0.95-1.05).
  bool prepare(const Node& node, bool f32, int64_t rows, int64_t depth, int64_t columns,
               const dnnl::memory::desc& b_md, const Tensor* constant_b, float scale,
               bool accumulate, const dnnl::stream& stream) {
    if (!f32 || !constant_b || depth <= 0 || columns <= depth || !Avx2PackedGemm::preferred() ||
        !packed_gemm_allowed() || (accumulate && scale != 1.f) ||
        !activation.prepare(node, plain_f32({rows, columns})))
      return false;
    m = rows;
    k = depth;
    n = columns;
    weights = PackedWeights(b_md, Avx2PackedGemm::packed_desc(k, n), constant_b, stream);
    epilogue = {};
    epilogue.scale = scale;
    epilogue.accumulate = accumulate;
    epilogue.relu = activation.relu_in_store();
    return true;
  }

  void run(const Tensor& a, const Tensor& b, const float* bias, Tensor& y,
           const dnnl::stream& stream) {
    const auto* packed = static_cast<const float*>(weights.get(b, stream).get_data_handle());
    Avx2PackedGemm::Epilogue e = epilogue;
    e.bias = bias;
    Avx2PackedGemm::run(a.data<float>(), k, m, k, n, packed, y.data<float>(), n, e);
    activation.run(y.data<float>(), stream);
  }
};

class MatMulKernel final : public DnnlKernel {
 public:
  explicit MatMulKernel(const KernelRequest& request) : DnnlKernel(request) {
    fused_sum_ = fused::has_sum(request.node);
    fused_bias_ = fused::has_bias(request.node);
    transposed_b_ = fused::transposes_b(request.node);
    scale_ = static_cast<float>(fused::scale(request.node));
    // (The graph compiler reads a Transpose of a constant into the constant itself.)
    if (transposed_b_ && constant(1)) throw Unsupported{};
    if (!supports_fused_activation(request.node)) throw Unsupported{};
    const size_t expected = 2u + (fused_bias_ ? 1u : 0u) + (fused_sum_ ? 1u : 0u);
    if (request.inputs.size() != expected || present_outputs(request) != 1) throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    if (inputs[0].rank() == 0 || inputs[1].rank() == 0) return false;
    Dims a = to_dims(inputs[0]);
    Dims b = to_dims(inputs[1]);
    if (transposed_b_) {
      if (b.size() < 2) return false;
      std::swap(b[b.size() - 1], b[b.size() - 2]);  // stored [.., N, K]: B is [.., K, N]
    }
    if (a.size() == 1) a.insert(a.begin(), 1);  // [K] -> [1, K]
    if (b.size() == 1) b.push_back(1);          // [K] -> [K, 1]
    // A batch of rows times one constant matrix (a Linear layer: [..., M, K] x [K, N]) is one
    // 2-D product of all the rows: oneDNN then packs B once into its blocked layout, which it
    // does not for a broadcast batch (measured with oneDNN 2.6 brg:avx512_core, one thread,
    // 128x768x3072 and 128x3072x768: 87-91 GFLOP/s packed vs 81-86 plain).
    if (a.size() > 2 && inputs[1].rank() == 2 && constant(1)) {
      int64_t rows = 1;
      for (size_t i = 0; i + 1 < a.size(); ++i) rows *= a[i];
      a = {rows, a.back()};
    }
    const size_t rank = std::max(a.size(), b.size());
    if (rank > DNNL_MAX_NDIMS) return false;
    a = pad_front(a, rank);
    b = pad_front(b, rank);
    if (a[rank - 1] != b[rank - 2]) return false;
    Dims y(rank);
    for (size_t i = 0; i + 2 < rank; ++i) {
      if (a[i] != b[i] && a[i] != 1 && b[i] != 1) return false;
      y[i] = std::max(a[i], b[i]);
    }
    y[rank - 2] = a[rank - 2];
    y[rank - 1] = b[rank - 1];
    int64_t count = 1;
    for (int64_t d : y) count *= d;
    if (count != outputs[0].element_count()) return false;
    packed_active_ = false;
    small_rows_ = false;
    if (rank == 2 && inputs[1].rank() == 2 && constant(1) &&
        compute_type() == dnnl::memory::data_type::f32 && a[0] <= SmallRowsProduct::max_rows) {
      // s * (AB + b) + R: the residual is in dst already, s * b is added to it, then s * AB.
      product_ = SmallRowsProduct{};
      product_.m = a[0];
      product_.k = a[1];
      product_.n = b[1];
      product_.alpha = scale_;
      product_.beta = scale_;
      product_.c_cols = product_.n;
      small_rows_ = product_.prepare(node_, *constant(1), stream_);
    }
    if (small_rows_) {
      set_impl(product_.implementation());
      return true;
    }
    packed_active_ =
        rank == 2 && inputs[1].rank() == 2 && (!fused_bias_ || inputs[2].element_count() == b[1]) &&
        packed_.prepare(node_, compute_type() == dnnl::memory::data_type::f32, a[0], a[1], b[1],
                        plain_f32(b), constant(1), scale_, fused_sum_, stream_);
    if (packed_active_) {
      set_impl("packed_gemm:avx2");
      return true;
    }
    // Fused post-ops in the graph compiler's order: bias (the primitive's own), scale, the
    // residual summed into dst (prefilled with it at run), then the activation.
    Dims bias(rank, 1);
    bias[rank - 1] = y[rank - 1];
    const dnnl::memory::desc bias_md = plain_f32(bias);
    // A 1-D B drops the last dimension of the promoted product: the bias runs along another.
    if (fused_bias_ && (inputs[1].rank() == 1 || inputs[2].element_count() != y[rank - 1]))
      return false;
    auto build = [&](bool sum_first) {
      dnnl::primitive_attr attr = primitive_attributes();
      dnnl::post_ops ops;
      if (sum_first) {
        // s * (AB + b) + R as (AB + b + R / s) * s: oneDNN's gemm-based matmul (AVX2) takes a
        // sum only as the first post-op, and answers the other order with its reference kernel.
        ops.append_sum(1.f / scale_);
        ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, scale_, 0.f);
      } else {
        if (scale_ != 1.f) {
          // Without a bias an output scale is exact; with one, an eltwise post-op after the
          // bias keeps the contract's order s * (AB + b).
          if (fused_bias_)
            ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, scale_, 0.f);
          else
            attr.set_output_scales(0, {scale_});
        }
        if (fused_sum_) ops.append_sum(1.f);
      }
      append_fused_activation(node_, ops);
      attr.set_post_ops(ops);
      return core_.build(compute_type(), plain_f32(a),
                         transposed_b_ ? transposed_f32(b) : plain_f32(b), constant(1),
                         plain_f32(y), fused_bias_ ? &bias_md : nullptr, attr, nullptr, stream_);
    };
    dnnl::matmul::primitive_desc pd = build(false);
    if (is_reference(pd) && fused_sum_ && fused_bias_ && scale_ != 1.f && scale_ != 0.f) {
      pd = unless_reference(pd, [&] { return build(true); });
      // build() sets up the kernel for what it made: the first again when the other lost.
      if (is_reference(pd)) pd = build(false);
    }
    set_impl(pd);
    return true;
  }

  const PackedWeights* packed_weights(size_t i) const override {
    if (i != 1) return nullptr;
    if (small_rows_) return product_.packed_b();
    return packed_active_ ? &packed_.weights : &core_.weights;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    // dst is plain: the sum reads the residual in place.
    if (fused_sum_) inputs[fused_bias_ ? 3 : 2].copy_to(outputs[0]);
    const Tensor* bias = fused_bias_ ? &inputs[2] : nullptr;
    if (packed_active_)
      packed_.run(inputs[0], inputs[1], bias ? bias->data<float>() : nullptr, outputs[0], stream_);
    else if (small_rows_)
      product_.run(inputs[0], inputs[1], bias, outputs[0], fused_sum_, stream_);
    else
      core_.run(inputs[0], inputs[1], bias, outputs[0], stream_);
  }

 private:
  bool fused_sum_ = false;
  bool fused_bias_ = false;
  bool transposed_b_ = false;  // B stored with its last two axes swapped
  float scale_ = 1.f;
  bool small_rows_ = false;
  SmallRowsProduct product_;
  bool packed_active_ = false;  // packed_ computes it (else product_ or core_)
  PackedProduct packed_;
  MatmulCore core_;
};

class GemmKernel final : public DnnlKernel {
 public:
  explicit GemmKernel(const KernelRequest& request) : DnnlKernel(request) {
    const Attributes& a = request.node.attributes;
    alpha_ = static_cast<float>(a.get_float_or("alpha", 1.0));
    beta_ = static_cast<float>(a.get_float_or("beta", 1.0));
    trans_a_ = a.get_int_or("transA", 0) != 0;
    trans_b_ = a.get_int_or("transB", 0) != 0;
    if (request.inputs.size() < 2 || present_outputs(request) != 1) throw Unsupported{};
    // Only a fused Relu; a fused sum would clash with C's post-ops, the reference runs those.
    if (!supports_fused_activation(request.node) || fused::has_sum(request.node))
      throw Unsupported{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    if (inputs[0].rank() != 2 || inputs[1].rank() != 2) return false;
    const int64_t m = trans_a_ ? inputs[0][1] : inputs[0][0];
    const int64_t k = trans_a_ ? inputs[0][0] : inputs[0][1];
    const int64_t kb = trans_b_ ? inputs[1][1] : inputs[1][0];
    const int64_t n = trans_b_ ? inputs[1][0] : inputs[1][1];
    if (k != kb) return false;
    const dnnl::memory::data_type f32 = dnnl::memory::data_type::f32;
    // Transposed operands are the same memory read with swapped strides.
    const dnnl::memory::desc a_md({m, k}, f32, trans_a_ ? Dims{1, m} : Dims{k, 1});
    const dnnl::memory::desc b_md({k, n}, f32, trans_b_ ? Dims{1, k} : Dims{n, 1});
    const dnnl::memory::desc y_md = plain_f32({m, n});

    use_c_ = has_input(2) && beta_ != 0.f;
    Dims c;
    if (use_c_) {
      if (inputs[2].rank() > 2) return false;
      c = pad_front(inputs[2].rank() == 0 ? Dims{1} : to_dims(inputs[2]), 2);
      if ((c[0] != m && c[0] != 1) || (c[1] != n && c[1] != 1)) return false;
    }
    const dnnl::memory::desc c_md = plain_f32(c.empty() ? Dims{1, 1} : c);
    packed_active_ = false;
    small_rows_ = false;
    if (constant(1) && compute_type() == dnnl::memory::data_type::f32 &&
        m <= SmallRowsProduct::max_rows) {
      product_ = SmallRowsProduct{};
      product_.m = m;
      product_.n = n;
      product_.k = k;
      product_.trans_a = trans_a_;
      product_.trans_b = trans_b_;
      product_.alpha = alpha_;
      product_.beta = beta_;
      if (use_c_) {
        product_.c_rows = c[0];
        product_.c_cols = c[1];
      }
      small_rows_ = product_.prepare(node_, *constant(1), stream_);
    }
    if (small_rows_) {
      set_impl(product_.implementation());
      return true;
    }
    // A Linear layer (C a bias row, or none with alpha as the scale) with A not transposed.
    const bool bias_row = use_c_ && alpha_ == 1.f && beta_ == 1.f && c[0] == 1 && c[1] == n;
    packed_active_ = !trans_a_ && (!use_c_ || bias_row) &&
                     packed_.prepare(node_, compute_type() == dnnl::memory::data_type::f32, m, k, n,
                                     b_md, constant(1), use_c_ ? 1.f : alpha_, false, stream_);
    if (packed_active_) {
      set_impl("packed_gemm:avx2");
      return true;
    }

    dnnl::primitive_attr attr = primitive_attributes();
    dnnl::post_ops ops;
    const dnnl::memory::desc* bias_md = nullptr;
    const dnnl::memory::desc* post_md = nullptr;
    if (!use_c_) {
      if (alpha_ != 1.f) attr.set_output_scales(0, {alpha_});
    } else if (alpha_ == 1.f && beta_ == 1.f) {
      bias_md = &c_md;  // the common Linear layer: C is a bias row
    } else {
      // alpha*AB + beta*C == beta * ((alpha/beta)*AB + C); output scales precede post-ops.
      if (alpha_ / beta_ != 1.f) attr.set_output_scales(0, {alpha_ / beta_});
      ops.append_binary(dnnl::algorithm::binary_add, c_md);
      if (beta_ != 1.f) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, beta_, 0.f);
      post_md = &c_md;
    }
    append_fused_activation(node_, ops);
    attr.set_post_ops(ops);
    dnnl::matmul::primitive_desc pd =
        core_.build(compute_type(), a_md, b_md, constant(1), y_md, bias_md, attr, post_md, stream_);
    set_impl(pd);
    return true;
  }

  const PackedWeights* packed_weights(size_t i) const override {
    if (i != 1) return nullptr;
    if (small_rows_) return product_.packed_b();
    return packed_active_ ? &packed_.weights : &core_.weights;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    const Tensor* c = use_c_ ? &inputs[2] : nullptr;
    if (packed_active_)
      packed_.run(inputs[0], inputs[1], c ? c->data<float>() : nullptr, outputs[0], stream_);
    else if (small_rows_)
      product_.run(inputs[0], inputs[1], c, outputs[0], false, stream_);
    else
      core_.run(inputs[0], inputs[1], c, outputs[0], stream_);
  }

 private:
  float alpha_ = 1.f;
  float beta_ = 1.f;
  bool trans_a_ = false;
  bool trans_b_ = false;
  bool use_c_ = false;
  bool small_rows_ = false;
  SmallRowsProduct product_;
  bool packed_active_ = false;  // packed_ computes it (else product_ or core_)
  PackedProduct packed_;
  MatmulCore core_;
};

}  // namespace

void register_matmul(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "MatMul", make_kernel<MatMulKernel>);
  registry.add(backend_name, backend_priority, "Gemm", make_kernel<GemmKernel>);
}

}  // namespace troupe::kernels::onednn
