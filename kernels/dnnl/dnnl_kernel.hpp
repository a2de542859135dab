#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/dnnl/primitive.hpp"
#include "kernels/kernel_registry.hpp"

namespace troupe::kernels::onednn {

inline constexpr const char* backend_name = "dnnl";
inline constexpr int backend_priority = 10;

using Dims = dnnl::memory::dims;

/// The process-wide CPU engine.
const dnnl::engine& cpu_engine();

/// oneDNN data type of an element type; nullopt when oneDNN has none.
std::optional<dnnl::memory::data_type> to_dnnl(ElementType type);

/// Dense row-major descriptor of `dims` (a rank-0 shape is described as {1}).
dnnl::memory::desc plain_desc(const Dims& dims, dnnl::memory::data_type type);
dnnl::memory::desc plain_f32(const Dims& dims);
/// A [k, n] f32 matrix in panels of `width` columns, each panel [k][width] and the last one
/// padded with zero columns (oneDNN would name it "Ba<width>b"; no format tag does): the copy of a
/// constant B that troupe's own products stream panel by panel.
dnnl::memory::desc column_panels_f32(int64_t k, int64_t n, int64_t width);

/// The channel block of the blocked activation layout oneDNN's direct convolutions use on this CPU
/// (8 with AVX2, 16 with AVX-512).
int native_channel_block();

/// Whether convolutions computed in f32 that kernels::winograd_shape accepts may use the Winograd
/// algorithm (oneDNN's AVX-512 kernels; on AVX2 troupe's own, winograd_avx2.hpp).
/// Yes unless TROUPE_CONV_WINOGRAD=0 (read whenever a kernel is created).
bool winograd_allowed();

/// Whether a model computed in bf16 may run some of its convolutions as f32 Winograd: on AVX-512
/// without AMX, where that outran oneDNN's bf16 direct kernel on some shapes (the convolution
/// times both, conv_timing.hpp).
bool bf16_takes_f32_winograd();

/// Whether f32 products by a constant B may run on troupe's packed GEMM on AVX2 CPUs
/// (packed_gemm_avx2.hpp). Yes unless TROUPE_PACKED_GEMM=0 (read whenever a kernel is created).
bool packed_gemm_allowed();

/// Whether depthwise convolutions oneDNN would run as a GEMM or its reference kernel run troupe's
/// own loops (depthwise_rows.hpp). Yes unless TROUPE_DEPTHWISE_ROWS=0 (read whenever a kernel is
/// prepared).
bool depthwise_rows_allowed();

/// Whether the steps of f32 RNN, GRU and LSTM kernels run blocks of hidden units on packed
/// weights (recurrent_steps.hpp) rather than one sgemm per step. Yes unless
/// TROUPE_RECURRENT_STEPS=0 (read whenever a kernel is created).
bool recurrent_steps_allowed();

/// Whether a 2-D ConvTranspose with few output channels runs as a product and its scatter
/// (deconv.cpp) rather than oneDNN's deconvolution. Yes unless TROUPE_DECONV_COLUMNS=0 (read
/// whenever a kernel is created).
bool deconv_columns_allowed();

/// Whether 2-D convolutions to 1-4 channels run troupe's loops (narrow_conv.hpp) rather than
/// oneDNN's. Yes unless TROUPE_NARROW_CONV=0 (read whenever a kernel is created).
bool narrow_conv_allowed();

/// The layout activations are kept in between convolutions and pooling. On AVX-512: blocked by
/// 16 for a model with a large share of convolutions Winograd can compute (its kernels read only
/// that layout), or with depthwise convolutions whose convolution activations nearly all have
/// whole 16-channel blocks; else channels-last (what oneDNN's brgemm convolutions read). Without
/// AVX-512, blocked by native_channel_block().
/// TROUPE_ACTIVATION_LAYOUT=blocked or channels_last overrides the choice (for measuring one
/// against the other; read whenever a kernel is created).
TensorLayout activation_layout(const KernelRequest& request);

/// Descriptor of a tensor of `dims` in `layout`: plain, channel-blocked by 8 or 16, or
/// channels-last, ranks 3 to 5.
dnnl::memory::desc tensor_desc(const Dims& dims, TensorLayout layout,
                               dnnl::memory::data_type type = dnnl::memory::data_type::f32);

/// `desc` (plain or strided) with its elements of `type`: the same dims and element strides.
dnnl::memory::desc with_type(const dnnl::memory::desc& desc, dnnl::memory::data_type type);

/// Dims of a static shape; rank-0 becomes {1}.
Dims to_dims(const Shape& shape);

/// `dims` with leading 1s up to `rank`.
Dims pad_front(const Dims& dims, size_t rank);

/// True when every present input and output of the request is f32 (omitted optional ones are
/// skipped).
bool all_f32(const KernelRequest& request);

/// Number of present (typed) outputs of the request.
size_t present_outputs(const KernelRequest& request);

class PackedWeights;

/// Base of the oneDNN kernels. Primitives are created by prepare() for concrete input shapes: at
/// construction when the request's shapes are static, else at the first execute and again whenever
/// the input shapes change. When oneDNN rejects a shape only known at run time, the kernel runs the
/// reference kernel instead so that a node accepted at compile time never fails for that reason.
class DnnlKernel : public Kernel {
 public:
  explicit DnnlKernel(const KernelRequest& request);

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) final;
  std::string implementation() const final;
  /// Input 0 and output 0 in the activation layout after lay_out_first_operand(), else plain.
  TensorLayout preferred_input_layout(size_t i) const override;
  TensorLayout preferred_output_layout(size_t o) const override;
  PackedConstant packed_constant(size_t i) const override;
  void release_constant(size_t i) override;
  bool is_layout_probe() const override { return layout_probe_; }

  /// Prepares for the request's shapes when they are static; returns false when oneDNN cannot run
  /// this instance (the factory then returns nullptr so another backend is tried).
  bool initialize(const KernelRequest& request);

 protected:
  /// Creates the primitives for these input/output shapes; returns false (or throws dnnl::error)
  /// when this instance is not supported.
  virtual bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) = 0;
  /// Whether preferred_input_layout and preferred_output_layout answer the same before prepare()
  /// ran as after: such a kernel created from a layout probe is not prepared.
  virtual bool layouts_known_unprepared() const { return false; }
  /// Runs the prepared primitives on dense tensors.
  virtual void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) = 0;
  /// The packed copy the kernel made of constant input i, if it made one.
  virtual const PackedWeights* packed_weights(size_t /*i*/) const { return nullptr; }

  /// For kernels that compute element by element or per channel (activations, normalizations):
  /// when the output is one static 4-D tensor, input 0 and output 0 may keep the model's
  /// activation layout, so that such a node between convolutions does not send its producer and
  /// its consumers to plain tensors.
  void lay_out_first_operand(const KernelRequest& request);
  /// Records the implementation name of the kernel's main primitive.
  void set_impl(const dnnl::primitive_desc_base& pd);
  /// Records the name of an implementation that is no oneDNN primitive (reported as "dnnl:name",
  /// the backend's).
  void set_impl(std::string name) { impl_ = std::move(name); }
  /// Whether input i is present in the request (not an omitted optional input).
  bool has_input(size_t i) const { return i < present_.size() && present_[i]; }
  /// The data of input i when it is a model constant, else nullptr.
  const Tensor* constant(size_t i) const;
  /// The data type the kernel computes its main operands in: f32, or bf16 where the request asks
  /// for bf16 inference (see KernelRequest::compute_precision). Its tensors are f32 unless their
  /// layout says bf16 (TensorLayout::bf16).
  dnnl::memory::data_type compute_type() const { return compute_type_; }
  /// The layout a value in `order` is kept in between kernels of the request's precision: bf16
  /// in a bf16 graph (for a kernel that reads and writes bf16 where its neighbours do), else
  /// `order` itself. Plain stays plain.
  TensorLayout stored_layout(TensorLayout order) const {
    const bool bf16 = compute_type_ == dnnl::memory::data_type::bf16;
    return bf16 && !order.is_plain() ? order.in_bf16() : order;
  }
  /// The layouts the graph compiler assigned to input i / output o.
  TensorLayout input_layout(size_t i) const {
    return i < input_layouts_.size() ? input_layouts_[i] : TensorLayout{};
  }
  TensorLayout output_layout(size_t o) const {
    return o < output_layouts_.size() ? output_layouts_[o] : TensorLayout{};
  }
  /// The layout this model keeps activations in between kernels that support one.
  TensorLayout activation_layout() const { return activation_layout_; }

  Node node_;  // attributes, and the name for messages
  std::string node_name_;
  std::string op_type_;
  dnnl::stream stream_;

 private:
  bool try_prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs);
  bool released(size_t i) const { return i < released_.size() && released_[i]; }

  std::vector<bool> present_;
  bool first_operand_laid_out_ = false;
  std::vector<TensorLayout> input_layouts_;
  std::vector<TensorLayout> output_layouts_;
  TensorLayout activation_layout_;
  std::vector<Tensor> constants_;  // empty Tensor where the input is not a constant
  std::vector<bool> released_;     // constants dropped after packing (release_constant)
  std::vector<Shape> prepared_for_;
  dnnl::memory::data_type compute_type_ = dnnl::memory::data_type::f32;
  bool prepared_ = false;
  bool layout_probe_ = false;
  bool use_fallback_ = false;
  std::unique_ptr<Kernel> fallback_;
  std::string impl_;
};

/// Whether oneDNN chose one of its reference implementations (`ref:any`, `ref_fused_...`,
/// `bnorm_ref:any`), which are written for correctness, not speed.
bool is_reference(const dnnl::primitive_desc_base& pd);
/// The same test on an implementation's name as oneDNN reports it.
bool is_reference_implementation(const std::string& name);

/// `pd`, or, where oneDNN answered it with one of its reference implementations, the primitive
/// descriptor `alternative()` makes (another formulation: layouts of the primitive's choosing)
/// when that one is a real kernel. An alternative oneDNN rejects leaves `pd`.
template <class PrimitiveDesc, class Alternative>
PrimitiveDesc unless_reference(PrimitiveDesc pd, Alternative&& alternative) {
  if (!is_reference(pd)) return pd;
  try {
    PrimitiveDesc other = alternative();
    if (!is_reference(other)) return other;
  } catch (const dnnl::error&) {
    // keep the reference: it runs
  }
  return pd;
}

/// make(type), or make(f32) where oneDNN has no implementation computing in `type` (bf16 on
/// instances without one; with `leave_reference`, also where it has only its reference one): a
/// bf16 request never sends a node to the reference kernel.
template <class Make>
auto create_in(dnnl::memory::data_type type, Make&& make, bool leave_reference = false) {
  if (type == dnnl::memory::data_type::f32) return make(type);
  try {
    auto pd = make(type);
    if (!leave_reference || !is_reference(pd)) return pd;
  } catch (const dnnl::error&) {
    // computed in f32 below
  }
  return make(dnnl::memory::data_type::f32);
}

/// Memory with no data yet (set_data_handle before each execution).
dnnl::memory unbound_memory(const dnnl::memory::desc& desc);

/// Points `memory` at a tensor's data (oneDNN never writes its sources, hence the const_cast).
inline void bind(dnnl::memory& memory, const Tensor& tensor) {
  memory.set_data_handle(const_cast<void*>(tensor.raw_data()));
}

/// Thrown by a kernel constructor for an instance it does not support (an attribute value,
/// a missing constant); the factory then returns nullptr.
struct Unsupported {};

/// A primitive's operand that may live in another layout than the troupe tensor (blocked weights,
/// blocked activations). A reorder converts between the two; when the layouts agree the tensor's
/// memory is used directly.
class LayoutBridge {
 public:
  LayoutBridge() = default;
  /// `plain` describes the troupe tensor, `internal` what the primitive wants. The internal
  /// buffer is the bridge's own, kept between runs (packed constants use that).
  LayoutBridge(const dnnl::memory::desc& plain, const dnnl::memory::desc& internal);
  /// The same with the internal buffer lent by the running thread, as the scratchpad is: slot
  /// `slot` of the thread's conversion buffers, shared by every kernel's bridge with that slot
  /// (kernels run one at a time on a thread). For conversions made and used within one run; the
  /// bridges one kernel uses together need different slots (below max_conversion_slots).
  LayoutBridge(const dnnl::memory::desc& plain, const dnnl::memory::desc& internal, int slot);
  static constexpr int max_conversion_slots = thread_buffer_count - 1;  // buffer 0: scratchpad

  bool needs_reorder() const { return needs_reorder_; }
  /// Memory to pass to the primitive for an input: the tensor itself, or the internal buffer
  /// after reordering the tensor into it.
  const dnnl::memory& to_internal(const Tensor& tensor, const dnnl::stream& stream);
  /// Memory the primitive writes an output into (call from_internal afterwards).
  const dnnl::memory& output_memory(Tensor& tensor);
  /// Reorders the internal buffer into the tensor when the layouts differ.
  void from_internal(Tensor& tensor, const dnnl::stream& stream);
  /// Converts the tensor into `target`, memory of the internal layout (a copy when the layouts
  /// agree).
  void to_memory(const Tensor& tensor, const dnnl::memory& target, const dnnl::stream& stream);
  /// The internal buffer (valid when needs_reorder()).
  const dnnl::memory& internal() const { return internal_; }

 private:
  // Points internal_ at the thread's buffer of this slot (a bridge of its own: nothing to do).
  void lend_internal();

  bool needs_reorder_ = false;
  int slot_ = -1;  // the thread's conversion buffer lent to internal_; -1: internal_ owns memory
  dnnl::memory plain_;
  dnnl::memory internal_;
  dnnl::reorder to_internal_;
  dnnl::reorder from_internal_;
};

/// A kernel that is one primitive from input 0 (SRC) to output 0 (DST): eltwise, pooling,
/// softmax. Subclasses create the primitive in prepare() and hand it over with adopt(), with the
/// descriptors of the troupe tensors; where they differ from the primitive's, a reorder bridges.
class SrcDstKernel : public DnnlKernel {
 public:
  using DnnlKernel::DnnlKernel;

 protected:
  template <class P, class PrimitiveDesc>
  bool adopt(const PrimitiveDesc& pd, const dnnl::memory::desc& src,
             const dnnl::memory::desc& dst) {
    primitive_ = Primitive::of<P>(pd);
    src_ = LayoutBridge(src, pd.src_desc(), 0);
    dst_ = LayoutBridge(dst, pd.dst_desc(), 1);
    set_impl(pd);
    return true;
  }
  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override;

 private:
  Primitive primitive_;
  LayoutBridge src_;
  LayoutBridge dst_;
};

struct SharedWeights;

/// Weights in the layout a primitive chose. A constant is reordered once, at prepare time, into
/// memory shared with every other kernel packing it the same way (shared_weights.hpp); other
/// weights are reordered on every run.
class PackedWeights {
 public:
  PackedWeights() = default;
  PackedWeights(const dnnl::memory::desc& plain, const dnnl::memory::desc& packed,
                const Tensor* constant, const dnnl::stream& stream);
  /// Memory to pass as the primitive's weights for this run.
  const dnnl::memory& get(const Tensor& weights, const dnnl::stream& stream);
  /// The constant as a shared packed copy that get() reads without it (Kernel::packed_constant),
  /// when the packing kept its data type; empty otherwise.
  PackedConstant packed_constant(ElementType type, const Shape& shape) const;

 private:
  dnnl::memory::desc plain_;
  std::shared_ptr<const SharedWeights> shared_;  // a packed constant
  bool packed_once_ = false;                     // a constant packed privately (not dense)
  LayoutBridge bridge_;
};

/// Creates a kernel of type K, or nullptr when K declines the request (Unsupported, a oneDNN
/// error, or prepare() returning false).
template <class K>
std::unique_ptr<Kernel> create_kernel(const KernelRequest& request) {
  std::unique_ptr<K> kernel;
  try {
    kernel = std::make_unique<K>(request);
  } catch (const Unsupported&) {
    return nullptr;
  } catch (const dnnl::error&) {
    return nullptr;
  }
  if (!kernel->initialize(request)) return nullptr;
  return kernel;
}

/// Creates a kernel of type K that is no DnnlKernel (a plain loop deciding in its constructor), or
/// nullptr when its constructor throws Unsupported.
template <class K>
std::unique_ptr<Kernel> construct_kernel(const KernelRequest& request) {
  try {
    return std::make_unique<K>(request);
  } catch (const Unsupported&) {
    return nullptr;
  }
}

/// Creates a kernel of type K when every input and output is f32, or nullptr.
template <class K>
std::unique_ptr<Kernel> make_kernel(const KernelRequest& request) {
  return all_f32(request) ? create_kernel<K>(request) : nullptr;
}

/// Creates a kernel of type K when its data (input 0 and output 0) is f32, whatever the types of
/// its other inputs (i64 sizes or axes), or nullptr.
template <class K>
std::unique_ptr<Kernel> make_kernel_for_data(const KernelRequest& request) {
  if (request.inputs.empty() || request.inputs[0].type != ElementType::f32 ||
      request.outputs.empty() || request.outputs[0].type != ElementType::f32)
    return nullptr;
  return create_kernel<K>(request);
}

}  // namespace troupe::kernels::onednn
