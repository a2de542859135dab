#include "kernels/dnnl/dnnl_kernel.hpp"

#include <algorithm>

#include "kernels/cpu_isa.hpp"
#include "kernels/dnnl/shared_weights.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

std::optional<dnnl::memory::data_type> to_dnnl(ElementType type) {
  using dt = dnnl::memory::data_type;
  switch (type) {
    case ElementType::f32:
      return dt::f32;
    case ElementType::f16:
      return dt::f16;
    case ElementType::bf16:
      return dt::bf16;
    case ElementType::i8:
      return dt::s8;
    case ElementType::u8:
      return dt::u8;
    case ElementType::i32:
      return dt::s32;
    default:
      return std::nullopt;
  }
}

dnnl::memory::desc plain_desc(const Dims& dims, dnnl::memory::data_type type) {
  Dims d = dims.empty() ? Dims{1} : dims;
  Dims strides(d.size(), 1);
  for (size_t i = d.size() - 1; i > 0; --i)
    strides[i - 1] = strides[i] * std::max<int64_t>(d[i], 1);
  return dnnl::memory::desc(d, type, strides);
}

dnnl::memory::desc plain_f32(const Dims& dims) {
  return plain_desc(dims, dnnl::memory::data_type::f32);
}

dnnl::memory::desc column_panels_f32(int64_t k, int64_t n, int64_t width) {
  dnnl_memory_desc_t d{};
  d.ndims = 2;
  d.dims[0] = d.padded_dims[0] = k;
  d.dims[1] = n;
  d.padded_dims[1] = (n + width - 1) / width * width;
  d.data_type = dnnl_f32;
  d.format_kind = dnnl_blocked;
  d.format_desc.blocking.strides[0] = width;
  d.format_desc.blocking.strides[1] = k * width;
  d.format_desc.blocking.inner_nblks = 1;
  d.format_desc.blocking.inner_blks[0] = width;
  d.format_desc.blocking.inner_idxs[0] = 1;
  return dnnl::memory::desc(d);
}

int native_channel_block() {
  return effective_cpu_isa().avx512 ? 16 : 8;
}

namespace {

// An on/off switch read from the environment: unset, empty or "1" is on, "0" off; anything else
// is named in the error.
bool switch_from_environment(const char* name) {
  const char* choice = std::getenv(name);
  if (!choice || !*choice || std::strcmp(choice, "1") == 0) return true;
  if (std::strcmp(choice, "0") == 0) return false;
  throw InvalidArgument(std::string("environment variable ") + name + "='" + choice +
                        "' is not a switch (allowed: 0, 1, or unset)");
}

}  // namespace

bool winograd_allowed() {
  return switch_from_environment("TROUPE_CONV_WINOGRAD");
}

bool bf16_takes_f32_winograd() {
  const CpuIsa& isa = effective_cpu_isa();
  return isa.avx512 && !isa.amx;
}

bool packed_gemm_allowed() {
  return switch_from_environment("TROUPE_PACKED_GEMM");
}

bool depthwise_rows_allowed() {
  return switch_from_environment("TROUPE_DEPTHWISE_ROWS");
}

bool narrow_conv_allowed() {
  return switch_from_environment("TROUPE_NARROW_CONV");
}

bool deconv_columns_allowed() {
  return switch_from_environment("TROUPE_DECONV_COLUMNS");
}

bool recurrent_steps_allowed() {
  return switch_from_environment("TROUPE_RECURRENT_STEPS");
}

TensorLayout activation_layout(const KernelRequest& request) {
  if (const char* choice = std::getenv("TROUPE_ACTIVATION_LAYOUT"); choice && *choice) {
    if (std::strcmp(choice, "blocked") == 0) return TensorLayout::blocked(native_channel_block());
    if (std::strcmp(choice, "channels_last") == 0) return TensorLayout::channels_last_order();
    throw InvalidArgument(std::string("environment variable TROUPE_ACTIVATION_LAYOUT='") + choice +
                          "' is not a layout (allowed: blocked, channels_last, or unset)");
  }
  // Measured with oneDNN 2.6 on a 2-core AVX-512 Xeon, one thread, the convolutions of
  // ResNet-50 (medians of 7 alternating runs on a noisy machine): brgconv on nhwc ran six of
  // seven 3x3 shapes 1.1-1.6x as fast as jit:avx512_core on nChw16c (one 0.8x), 1x1 ones
  // 0.7-1.2x; whole ResNet-50 runs with 2 streams later gave nChw16c 0.87-0.93x the throughput.
  // MobileNetV2 goes the other way: its depthwise convolutions ran 10-25% faster as jit_dw on
  // nChw16c than as brdgmm_dw on nhwc, and so did its 1x1 convolutions at 112x112, so the whole
  // model ran 1.00-1.06x as fast blocked (7 alternating 8 s runs, median 1.03x).
  // But a tensor whose channels 16 does not divide stays plain, with reorders around it. On Zen 5
  // (interleaved runs, throughput; the share of convolution activation elements 16 divides in
  // brackets) channels-last ran MNASNet, MobileNetV3-large/small, ShuffleNetV2 and
  // DeepLabV3-MobileNetV3 (0-72%) 1.14-1.48x as fast as blocked, EfficientNetV2-S (92%) 1.06x;
  // blocked ran EfficientNet-B0 (94.8%) 1.04-1.06x and MobileNetV2 (95.9%) 1.01-1.02x as fast,
  // ConvNeXt-T (97.3%) 0.97x. The threshold sits between the 92% and 94.8% models.
  // oneDNN's Winograd kernels (AVX-512 only) read and write nChw16c alone. On Zen 4 (interleaved
  // runs, throughput, 2 streams) blocked activations with Winograd ran ResNet-18 1.47x, GoogLeNet
  // 1.33x, DenseNet-121 1.24x and ResNet-50 1.20x as fast as channels-last, blocked ones without
  // it 0.99-1.04x; ResNet-50's eligible convolutions took 0.48-0.71x of the direct kernel's time.
  // In the zoo the share of multiply-accumulates Winograd can take is 0 or under 7%
  // (DeepLabV3-MobileNetV3, kept channels-last) or 36% and more (Inception-v3 1.02x, ResNet-50
  // 1.22x, DenseNet-121, ...): the threshold sits between, at a fifth. (EfficientNetV2-S's 3x3
  // convolutions end in SiLU, which the Winograd kernels refuse: it stays channels-last.)
  if (native_channel_block() != 16) return TensorLayout::blocked(native_channel_block());
  // A quantized model that joins dequantized activations (DenseNet's blocks: Concat of the int8
  // layers' dequantized outputs, a quantizing normalization after) keeps its float side in
  // 16-channel blocks, where the memory plan writes each join in place (channels-last
  // interleaves the parts per pixel): the int8 layers stay channels-last, and the conversions
  // between the two are 16-lane loops. DenseNet-121 int8 on Zen 5: its 58 joins were 14% of an
  // inference as channels-last copies.
  if (request.dequantized_joins_in_16_blocks) return TensorLayout::blocked(16);
  // Models whose convolutions are mostly wide 1-D ones (Conv1d over audio or point clouds, 128
  // channels and more) ran faster blocked on Zen 4 (interleaved runs, throughput, 2 streams):
  // PointNet 1.30x in f32 and 1.37x in bf16 (its 1x1 convolutions as jit_1x1 on nCw16c instead
  // of brgconv_1x1 on nwc: 3.1 against 4.2 ms each), a wav2vec2 encoder 1.14x / 1.10x. Narrow
  // ones gain nothing: a TCN of 64 channels ran 1.02-1.06x at the throughput hint but its
  // convolutions took 1.2x as long with one request on two threads (three of them leaving
  // brgconv for jit), a TextCNN and a Conformer 0.98-0.99x.
  if (request.conv1d_share >= 0.5) return TensorLayout::blocked(16);
  // Video models (3-D convolutions) run channels-last: on Zen 5, one thread, S3D's convolutions
  // took 157 ms per inference as brgconv on ndhwc against 213 ms as jit on nCdhw16c, X3D's
  // (depthwise 3x3x3 on troupe's loops either way, 1x1 as brgconv or jit) 28.5 against 47 ms.
  if (request.conv3d_share >= 0.5) return TensorLayout::channels_last_order();
  // In bf16 a model without depthwise convolutions takes that layout too where its convolutions
  // may run as f32 Winograd (bf16_takes_f32_winograd): its bf16 convolutions ran about as fast on
  // it as on channels-last (Zen 4: ResNet-18 1.06x, U-Net 1.00x, VGG-11 0.97x). A depthwise model
  // keeps its layout: it gains nothing there (its depthwise and 1x1 convolutions are most of its
  // work), and EfficientNetV2-S measured 0.94x blocked, though 0.96x again with the layout kept,
  // so that difference is within this VM's noise.
  const bool winograd_precision = request.compute_precision == ElementType::f32 ||
                                  (request.compute_precision == ElementType::bf16 &&
                                   bf16_takes_f32_winograd() && !request.depthwise_model);
  if (request.winograd_conv_share >= 0.2 && winograd_precision && winograd_allowed())
    return TensorLayout::blocked(16);
  return request.depthwise_model && request.conv_channels_in_16_blocks >= 0.94
             ? TensorLayout::blocked(16)
             : TensorLayout::channels_last_order();
}

dnnl::memory::desc tensor_desc(const Dims& dims, TensorLayout layout,
                               dnnl::memory::data_type type) {
  if (layout.bf16) type = dnnl::memory::data_type::bf16;
  if (layout.order().is_plain()) return plain_desc(dims, type);
  using tag = dnnl::memory::format_tag;
  if (layout.channels_last) {
    if (dims.size() < 3 || dims.size() > 5) throw Unsupported{};
    const tag channels_last[] = {tag::nwc, tag::nhwc, tag::ndhwc};
    return {dims, type, channels_last[dims.size() - 3]};
  }
  const bool b16 = layout.channel_block == 16;
  if (layout.channel_block != 8 && !b16) throw Unsupported{};
  switch (dims.size()) {
    case 3:
      return {dims, type, b16 ? tag::nCw16c : tag::nCw8c};
    case 4:
      return {dims, type, b16 ? tag::nChw16c : tag::nChw8c};
    case 5:
      return {dims, type, b16 ? tag::nCdhw16c : tag::nCdhw8c};
    default:
      throw Unsupported{};
  }
}

dnnl::memory::desc with_type(const dnnl::memory::desc& desc, dnnl::memory::data_type type) {
  const int rank = desc.data.ndims;
  const Dims strides(desc.data.format_desc.blocking.strides,
                     desc.data.format_desc.blocking.strides + rank);
  return dnnl::memory::desc(desc.dims(), type, strides);
}

Dims to_dims(const Shape& shape) {
  if (shape.rank() == 0) return Dims{1};
  return Dims(shape.dims().begin(), shape.dims().end());
}

Dims pad_front(const Dims& dims, size_t rank) {
  if (dims.size() >= rank) return dims;
  Dims out(rank - dims.size(), 1);
  out.insert(out.end(), dims.begin(), dims.end());
  return out;
}

bool all_f32(const KernelRequest& request) {
  for (const ValueInfo& v : request.inputs)
    if (v.type != ElementType::undefined && v.type != ElementType::f32) return false;
  for (const ValueInfo& v : request.outputs)
    if (v.type != ElementType::undefined && v.type != ElementType::f32) return false;
  return true;
}

size_t present_outputs(const KernelRequest& request) {
  size_t n = 0;
  for (const ValueInfo& v : request.outputs)
    if (v.type != ElementType::undefined) ++n;
  return n;
}

bool is_reference_implementation(const std::string& name) {
  // `ref:any`, `ref_int8:any`, `ref_fused_convolution`, and named ones such as the batch
  // normalization's `bnorm_ref:any`.
  return name.rfind("ref", 0) == 0 || name.find("_ref:") != std::string::npos;
}

bool is_reference(const dnnl::primitive_desc_base& pd) {
  return is_reference_implementation(pd.impl_info_str());
}

dnnl::memory unbound_memory(const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, cpu_engine(), DNNL_MEMORY_NONE);
}

void SrcDstKernel::run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  primitive_.execute(stream_, {{DNNL_ARG_SRC, src_.to_internal(inputs[0], stream_)},
                               {DNNL_ARG_DST, dst_.output_memory(outputs[0])}});
  dst_.from_internal(outputs[0], stream_);
}

DnnlKernel::DnnlKernel(const KernelRequest& request)
    : node_(request.node),
      node_name_(request.node.name),
      op_type_(request.node.op_type),
      stream_(cpu_engine()),
      present_(request.inputs.size()),
      input_layouts_(request.input_layouts),
      output_layouts_(request.output_layouts),
      activation_layout_(onednn::activation_layout(request)),
      constants_(request.inputs.size()),
      released_(request.inputs.size(), false) {
  if (request.compute_precision == ElementType::bf16) compute_type_ = dnnl::memory::data_type::bf16;
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    present_[i] = request.inputs[i].type != ElementType::undefined;
    if (i < request.constant_inputs.size() && request.constant_inputs[i])
      constants_[i] = *request.constant_inputs[i];
  }
}

PackedConstant DnnlKernel::packed_constant(size_t i) const {
  const Tensor* data = constant(i);
  const PackedWeights* packed = packed_weights(i);
  // A kernel that may run the reference (shapes known at run time, or ones oneDNN refused)
  // reads the constant itself.
  if (!data || !packed || fallback_ || use_fallback_ || !prepared_) return {};
  return packed->packed_constant(data->element_type(), data->shape());
}

void DnnlKernel::release_constant(size_t i) {
  if (i >= constants_.size()) return;
  constants_[i] = Tensor();
  released_[i] = true;
}

const Tensor* DnnlKernel::constant(size_t i) const {
  return i < constants_.size() && !constants_[i].empty() ? &constants_[i] : nullptr;
}

bool DnnlKernel::initialize(const KernelRequest& request) {
  bool is_static = true;
  bool is_empty = false;
  for (const ValueInfo& v : request.inputs)
    if (v.type != ElementType::undefined && !v.shape.is_static()) is_static = false;
  for (const ValueInfo& v : request.outputs) {
    if (v.type == ElementType::undefined) continue;
    if (!v.shape.is_static())
      is_static = false;
    else if (v.shape.element_count() == 0)
      is_empty = true;
  }
  if (!is_static) {
    // Shapes known only at run time may turn out to be ones oneDNN rejects.
    fallback_ = KernelRegistry::instance().create_with("reference", request);
    return true;
  }
  if (is_empty) return true;  // nothing to compute; execute() returns early
  if (request.layout_probe && layouts_known_unprepared()) {
    layout_probe_ = true;
    return true;
  }
  std::vector<Shape> in;
  std::vector<Shape> out;
  for (const ValueInfo& v : request.inputs) in.push_back(v.shape);
  for (const ValueInfo& v : request.outputs) out.push_back(v.shape);
  if (!try_prepare(in, out)) return false;
  prepared_for_ = std::move(in);
  prepared_ = true;
  return true;
}

bool DnnlKernel::try_prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) {
  try {
    return prepare(inputs, outputs);
  } catch (const dnnl::error&) {
    return false;
  } catch (const Unsupported&) {
    return false;
  }
}

void DnnlKernel::set_impl(const dnnl::primitive_desc_base& pd) {
  impl_ = pd.impl_info_str();
  // Say when a primitive computes in bf16 and its name does not (oneDNN's gemm:jit, brg).
  if (pd.src_desc().data_type() == dnnl::memory::data_type::bf16 &&
      impl_.find("bf16") == std::string::npos)
    impl_ += "/bf16";
  // And when a product asked to compute in bf16 computes in f32 (no bf16 kernel for the
  // instance, or an f32 Winograd convolution outrunning it): runtime_precision reads this.
  const bool product = op_type_ == "Conv" || op_type_ == "ConvTranspose" || op_type_ == "MatMul" ||
                       op_type_ == "Gemm" || op_type_ == "LSTM" || op_type_ == "GRU" ||
                       op_type_ == "RNN";
  if (product && compute_type_ == dnnl::memory::data_type::bf16 &&
      pd.src_desc().data_type() == dnnl::memory::data_type::f32)
    impl_ += Kernel::f32_instead_of_bf16;
}

TensorLayout DnnlKernel::preferred_input_layout(size_t i) const {
  return first_operand_laid_out_ && i == 0 ? activation_layout_ : TensorLayout{};
}

TensorLayout DnnlKernel::preferred_output_layout(size_t o) const {
  return first_operand_laid_out_ && o == 0 ? activation_layout_ : TensorLayout{};
}

void DnnlKernel::lay_out_first_operand(const KernelRequest& request) {
  const Shape& out = request.outputs.empty() ? Shape{} : request.outputs[0].shape;
  first_operand_laid_out_ = (out.rank() == 4 || out.rank() == 5) && out.is_static();
}

std::string DnnlKernel::implementation() const {
  if (use_fallback_ && fallback_) return fallback_->implementation();
  return impl_.empty() ? std::string("dnnl") : "dnnl:" + impl_;
}

void DnnlKernel::execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) {
  if (layout_probe_)
    throw ExecutionError(op_type_ + " node '" + node_name_ +
                         "': its kernel was created as a layout probe and cannot run");
  for (const Tensor& t : outputs)
    if (!t.empty() && t.size() == 0) return;

  bool same = prepared_ && prepared_for_.size() == inputs.size();
  for (size_t i = 0; same && i < inputs.size(); ++i) same = inputs[i].shape() == prepared_for_[i];
  if (!same && std::find(released_.begin(), released_.end(), true) != released_.end())
    throw ExecutionError(op_type_ + " node '" + node_name_ +
                         "': its constant weights were released after packing; it cannot be "
                         "prepared for other input shapes");
  if (!same) {
    std::vector<Shape> in;
    std::vector<Shape> out;
    for (const Tensor& t : inputs) in.push_back(t.shape());
    for (const Tensor& t : outputs) out.push_back(t.shape());
    use_fallback_ = !try_prepare(in, out);
    prepared_for_ = std::move(in);
    prepared_ = true;
    if (use_fallback_ && !fallback_)
      throw ExecutionError(
          op_type_ + " node '" + node_name_ +
          "': oneDNN cannot run these input shapes and no reference kernel exists");
  }
  if (use_fallback_) {
    fallback_->execute(inputs, outputs);
    return;
  }

  // oneDNN sees plain dense memory; strided tensors go through dense copies.
  bool dense_inputs = true;
  bool dense_outputs = true;
  // A released constant's placeholder is never read (its packed copy is): no dense copy.
  for (size_t i = 0; i < inputs.size(); ++i)
    dense_inputs = dense_inputs && (inputs[i].empty() || released(i) || inputs[i].is_contiguous());
  for (const Tensor& t : outputs) dense_outputs = dense_outputs && (t.empty() || t.is_contiguous());
  if (dense_inputs && dense_outputs) {
    run(inputs, outputs);
    stream_.wait();
    return;
  }
  std::vector<Tensor> in_copy;
  if (!dense_inputs)
    for (size_t i = 0; i < inputs.size(); ++i)
      in_copy.push_back(inputs[i].empty() || released(i) ? inputs[i] : inputs[i].contiguous());
  std::vector<Tensor> out_copy;
  if (!dense_outputs)
    for (const Tensor& t : outputs)
      out_copy.push_back(t.empty() || t.is_contiguous() ? t : Tensor(t.element_type(), t.shape()));
  run(dense_inputs ? inputs : in_copy, dense_outputs ? outputs : out_copy);
  stream_.wait();
  if (!dense_outputs)
    for (size_t i = 0; i < outputs.size(); ++i)
      if (!outputs[i].empty() && !outputs[i].is_contiguous()) out_copy[i].copy_to(outputs[i]);
}

}  // namespace troupe::kernels::onednn

namespace troupe::kernels::onednn {

LayoutBridge::LayoutBridge(const dnnl::memory::desc& plain, const dnnl::memory::desc& internal)
    : needs_reorder_(plain != internal), plain_(unbound_memory(plain)) {
  if (!needs_reorder_) return;
  internal_ = dnnl::memory(internal, cpu_engine());
  to_internal_ = dnnl::reorder(plain_, internal_);
  from_internal_ = dnnl::reorder(internal_, plain_);
}

// A conversion buffer in every kernel of every stream (a convolution converting a large
// activation between f32 and bf16, or into a layout) held memory as large as the activation for
// the model's lifetime: U-Net in bf16 with f32 Winograd convolutions held ~125 MB of them per
// stream. A thread runs one kernel at a time, so its kernels can share one buffer per slot.
LayoutBridge::LayoutBridge(const dnnl::memory::desc& plain, const dnnl::memory::desc& internal,
                           int slot)
    : needs_reorder_(plain != internal), slot_(slot), plain_(unbound_memory(plain)) {
  if (slot < 0 || slot >= max_conversion_slots)
    throw std::logic_error("LayoutBridge: conversion slot " + std::to_string(slot) +
                           " out of range");
  if (!needs_reorder_) return;
  internal_ = unbound_memory(internal);
  to_internal_ = dnnl::reorder(plain_, internal_);
  from_internal_ = dnnl::reorder(internal_, plain_);
}

void LayoutBridge::lend_internal() {
  if (slot_ >= 0)
    internal_.set_data_handle(thread_buffer(1 + slot_, internal_.get_desc().get_size()));
}

const dnnl::memory& LayoutBridge::to_internal(const Tensor& tensor, const dnnl::stream& stream) {
  bind(plain_, tensor);
  if (!needs_reorder_) return plain_;
  lend_internal();
  to_internal_.execute(stream, plain_, internal_);
  return internal_;
}

const dnnl::memory& LayoutBridge::output_memory(Tensor& tensor) {
  if (!needs_reorder_) {
    bind(plain_, tensor);
    return plain_;
  }
  lend_internal();
  return internal_;
}

void LayoutBridge::from_internal(Tensor& tensor, const dnnl::stream& stream) {
  if (!needs_reorder_) return;
  bind(plain_, tensor);
  from_internal_.execute(stream, internal_, plain_);
}

void LayoutBridge::to_memory(const Tensor& tensor, const dnnl::memory& target,
                             const dnnl::stream& stream) {
  if (!needs_reorder_) {
    if (target.get_data_handle() != tensor.raw_data())
      std::memcpy(target.get_data_handle(), tensor.raw_data(), plain_.get_desc().get_size());
    return;
  }
  bind(plain_, tensor);
  dnnl::memory dst = target;  // a handle copy: execute() takes non-const memory
  to_internal_.execute(stream, plain_, dst);
}

PackedWeights::PackedWeights(const dnnl::memory::desc& plain, const dnnl::memory::desc& packed,
                             const Tensor* constant, const dnnl::stream& stream)
    : plain_(plain) {
  if (constant && plain != packed && constant->owns_memory() && constant->is_contiguous()) {
    shared_ = shared_packed_weights(*constant, plain, packed, stream);
    return;
  }
  bridge_ = LayoutBridge(plain, packed);
  if (constant && bridge_.needs_reorder()) {
    const Tensor dense = constant->contiguous();
    bridge_.to_internal(dense, stream);
    dnnl::stream(stream).wait();  // a handle copy: wait() is not const
    packed_once_ = true;
  }
}

PackedConstant PackedWeights::packed_constant(ElementType type, const Shape& shape) const {
  // Exact only as a pure reorder: not into another type, nor with compensation stored beside
  // the weights (int8 convolutions of s8 sources), nor transformed (Winograd's weights), which
  // oneDNN cannot reorder back.
  const dnnl::memory::desc packed = shared_ ? shared_->packed.get_desc() : dnnl::memory::desc();
  if (!shared_ || packed.data_type() != plain_.data_type() ||
      packed.data.format_kind != dnnl_blocked ||
      packed.data.extra.flags != dnnl_memory_extra_flag_none)
    return {};
  PackedConstant result;
  result.restore = [shared = shared_, plain = plain_, type, shape] {
    return unpack_shared_weights(*shared, plain, type, shape);
  };
  result.forget_source = [shared = shared_] { forget_shared_source(*shared); };
  return result;
}

const dnnl::memory& PackedWeights::get(const Tensor& weights, const dnnl::stream& stream) {
  if (shared_) return shared_->packed;
  if (packed_once_) return bridge_.internal();
  return bridge_.to_internal(weights, stream);
}

}  // namespace troupe::kernels::onednn
