// Transpose (f32, u8, i8) as a oneDNN reorder: the input is described with the output's dims and
// the input's strides permuted, so the reorder walks it in output order and writes the output
// densely. A permutation that keeps the innermost axes in place (attention's [B,S,H,D] <->
// [B,H,S,D]) moves whole rows instead: oneDNN 2.6's reorder walked such a 128x12x64 tensor element
// by element, about 100 us where row copies take a fraction of that. In a model whose activations
// are channels-last the input may be too (its strides are the layout's): a detector head's
// [N,C,H,W] -> [N,H,W,C] output permutation then copies memory that is already in the output's
// order, instead of the convolution writing plain and the reorder walking it back (an
// EfficientDet's class head: 2.3 ms). Likewise a channels-last output: [N,H,W,C] -> [N,C,H,W]
// into a convolution (DGCNN's edge features) copies memory in order.
// In any model a permutation that moves the channels last ([N,C,spatial...] -> [N,spatial...,C])
// may read the model's laid-out activations, and one that moves them back may write them: the
// token sequences of vision transformers with convolutions between their layers (PVT, SegFormer,
// CvT; a convolutional feature extractor before a transformer) then enter and leave the
// convolutions' layout in one reorder, and the convolutions run on it instead of plain tensors.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"

namespace troupe::kernels::onednn {

namespace {

class TransposeKernel final : public SrcDstKernel {
 public:
  explicit TransposeKernel(const KernelRequest& request)
      : SrcDstKernel(request), perm_(request.node.attributes.get_ints_or("perm", {})) {
    if (request.inputs.size() != 1 || present_outputs(request) != 1) throw Unsupported{};
    type_ = request.inputs[0].type;
    element_size_ = element_size(type_);
    const size_t rank = request.inputs[0].shape.rank();
    auto may_lay_out = [&](const Shape& shape) {
      return type_ == ElementType::f32 && (shape.rank() == 4 || shape.rank() == 3) &&
             shape.is_static();
    };
    const bool channels_last_model = activation_layout().channels_last;
    reads_laid_out_ = may_lay_out(request.inputs[0].shape) &&
                      (channels_last_model || moves_channels_last(perm_, rank));
    writes_laid_out_ = may_lay_out(request.outputs[0].shape) &&
                       (channels_last_model || moves_channels_first(perm_, rank));
  }

  TensorLayout preferred_input_layout(size_t i) const override {
    return i == 0 && reads_laid_out_ ? activation_layout() : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 && writes_laid_out_ ? activation_layout() : TensorLayout{};
  }

 protected:
  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) override {
    row_copy_ = false;  // until these shapes are known to move rows
    const size_t rank = inputs[0].rank();
    if (rank > DNNL_MAX_NDIMS) return false;
    std::vector<int64_t> perm = perm_;
    if (perm.empty()) {  // default: reverse the axes
      perm.resize(rank);
      std::iota(perm.rbegin(), perm.rend(), int64_t{0});
    }
    if (perm.size() != rank) return false;
    const Dims in = to_dims(inputs[0]);
    const TensorLayout in_layout = input_layout(0), out_layout = output_layout(0);
    if (in_layout.bf16 || out_layout.bf16) return false;
    if (in_layout.channel_block > 0) return prepare_blocked_input(in, perm, out_layout);
    if (rank == 0) {
      const dnnl::memory::desc md = plain_desc(in, *to_dnnl(type_));
      return adopt<dnnl::reorder>(
          dnnl::reorder::primitive_desc(cpu_engine(), md, cpu_engine(), md, primitive_attributes()),
          md, md);
    }
    // The input's axes from the outermost in memory to the innermost, and their strides.
    std::vector<size_t> memory_order(rank);
    std::iota(memory_order.begin(), memory_order.end(), size_t{0});
    if (in_layout.channels_last) {  // [N, C, spatial...] stored N, spatial..., C
      if (rank < 3) return false;
      memory_order.erase(memory_order.begin() + 1);
      memory_order.push_back(1);
    }
    Dims in_strides(rank, 1);
    for (size_t k = rank - 1; k > 0; --k)
      in_strides[memory_order[k - 1]] = in_strides[memory_order[k]] * in[memory_order[k]];
    Dims out(rank);
    Dims strides(rank);
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank) ||
          seen[static_cast<size_t>(perm[i])])
        return false;
      seen[static_cast<size_t>(perm[i])] = true;
      out[i] = in[static_cast<size_t>(perm[i])];
      strides[i] = in_strides[static_cast<size_t>(perm[i])];
    }
    if (Shape(std::vector<int64_t>(out.begin(), out.end())) != outputs[0]) return false;
    // The output's axes in the order it is written: a channels-last output (read by a
    // convolution) is written N, spatial..., C.
    std::vector<int64_t> written = perm;
    if (out_layout.channels_last) {
      written.erase(written.begin() + 1);
      written.push_back(perm[1]);
    }
    if (out_layout.channel_block == 0 && plan_row_copy(in, written, memory_order, in_strides)) {
      set_impl("row_copy");
      return true;
    }
    const dnnl::memory::desc src(out, *to_dnnl(type_), strides);
    const dnnl::memory::desc dst = tensor_desc(out, output_layout(0).order(), *to_dnnl(type_));
    return adopt<dnnl::reorder>(
        dnnl::reorder::primitive_desc(cpu_engine(), src, cpu_engine(), dst, primitive_attributes()),
        src, dst);
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (!row_copy_) return SrcDstKernel::run(inputs, outputs);
    const auto* src = static_cast<const uint8_t*>(inputs[0].raw_data());
    auto* dst = static_cast<uint8_t*>(outputs[0].raw_data());
    const size_t rank = outer_dims_.size();
    const auto size = static_cast<int64_t>(element_size_);
    const size_t row_bytes = static_cast<size_t>(row_ * size);
    // Rows spread over the stream's threads (one copy thread reads ~10 GB/s here; Swin's window
    // shuffles moved 2-3 MB each), each thread starting its odometer at its first row.
    if (rows_ == 1) {  // one contiguous copy (a permutation the input's layout already has)
      const auto bytes = static_cast<int64_t>(row_bytes);
      constexpr int64_t chunk = int64_t{1} << 18;
      for_each_chunk(bytes, chunk, [&](int64_t begin, int64_t count) {
        std::memcpy(dst + begin, src + begin, static_cast<size_t>(count));
      });
      return;
    }
    const bool parallel = static_cast<size_t>(rows_) * row_bytes >= (size_t{1} << 18) && rows_ > 1;
    run_team_if(parallel, [&] {
      const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
      const int64_t first = rows_ * me / team, last = rows_ * (me + 1) / team;
      std::vector<int64_t> index(rank, 0);
      int64_t offset = 0;  // of the current row in src, in elements
      for (size_t i = rank, rest = static_cast<size_t>(first); i-- > 0;) {
        index[i] = static_cast<int64_t>(rest % static_cast<size_t>(outer_dims_[i]));
        rest /= static_cast<size_t>(outer_dims_[i]);
        offset += index[i] * outer_strides_[i];
      }
      uint8_t* out = dst + static_cast<size_t>(first) * row_bytes;
      for (int64_t r = first; r < last; ++r) {
        std::memcpy(out, src + offset * size, row_bytes);
        out += row_bytes;
        // Next output row: advance the innermost outer index, carrying into the ones before it.
        for (size_t i = rank; i-- > 0;) {
          offset += outer_strides_[i];
          if (++index[i] < outer_dims_[i]) break;
          offset -= outer_strides_[i] * outer_dims_[i];
          index[i] = 0;
        }
      }
    });
  }

 private:
  // [N, C, spatial...] -> [N, spatial..., C], and back.
  static bool moves_channels_last(const std::vector<int64_t>& perm, size_t rank) {
    if (rank < 3 || perm.size() != rank || perm[0] != 0 || perm[rank - 1] != 1) return false;
    for (size_t i = 1; i + 1 < rank; ++i)
      if (perm[i] != static_cast<int64_t>(i + 1)) return false;
    return true;
  }
  static bool moves_channels_first(const std::vector<int64_t>& perm, size_t rank) {
    if (rank < 3 || perm.size() != rank || perm[0] != 0 ||
        perm[1] != static_cast<int64_t>(rank - 1))
      return false;
    for (size_t i = 2; i < rank; ++i)
      if (perm[i] != static_cast<int64_t>(i - 1)) return false;
    return true;
  }

  // A channel-blocked input (the convolutions' nChw16c) into a plain output: the output is
  // described with the input's dims and its own strides permuted back, so the reorder reads the
  // blocks in order and scatters each 16-channel block into its 16 output rows.
  bool prepare_blocked_input(const Dims& in, const std::vector<int64_t>& perm,
                             TensorLayout out_layout) {
    if (!out_layout.is_plain()) return false;
    const size_t rank = in.size();
    Dims out(rank);
    for (size_t i = 0; i < rank; ++i) {
      if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank)) return false;
      out[i] = in[static_cast<size_t>(perm[i])];
    }
    Dims out_strides(rank, 1);
    for (size_t i = rank - 1; i > 0; --i) out_strides[i - 1] = out_strides[i] * out[i];
    Dims strides(rank, 0);  // of the output, per input axis
    for (size_t i = 0; i < rank; ++i) strides[static_cast<size_t>(perm[i])] = out_strides[i];
    if (std::find(strides.begin(), strides.end(), 0) != strides.end()) return false;
    const dnnl::memory::desc src = tensor_desc(in, input_layout(0).order(), *to_dnnl(type_));
    const dnnl::memory::desc dst(in, *to_dnnl(type_), strides);
    return adopt<dnnl::reorder>(
        dnnl::reorder::primitive_desc(cpu_engine(), src, cpu_engine(), dst, primitive_attributes()),
        src, dst);
  }

  // Whether the output, written densely with the input axes in the order `perm` lists them, is
  // rows of at least 16 contiguous input elements (the innermost input axes in memory, in order,
  // ignoring axes of size 1); if so, records the other axes to walk.
  bool plan_row_copy(const Dims& in, const std::vector<int64_t>& perm,
                     const std::vector<size_t>& memory_order, const Dims& in_strides) {
    const size_t rank = in.size();
    std::vector<size_t> kept;  // input axes in output order, size-1 axes dropped
    for (size_t i = 0; i < rank; ++i)
      if (in[static_cast<size_t>(perm[i])] != 1) kept.push_back(static_cast<size_t>(perm[i]));
    std::vector<size_t> input_axes;  // the same axes in memory order
    for (size_t a : memory_order)
      if (in[a] != 1) input_axes.push_back(a);
    // The row: the longest run of trailing axes that stay last and in order.
    row_ = 1;
    size_t inner = 0;
    while (inner < kept.size() &&
           kept[kept.size() - 1 - inner] == input_axes[input_axes.size() - 1 - inner]) {
      row_ *= in[kept[kept.size() - 1 - inner]];
      ++inner;
    }
    if (row_ < 16) return false;
    outer_dims_.clear();
    outer_strides_.clear();
    rows_ = 1;
    for (size_t i = 0; i + inner < kept.size(); ++i) {
      outer_dims_.push_back(in[kept[i]]);
      outer_strides_.push_back(in_strides[kept[i]]);
      rows_ *= in[kept[i]];
    }
    row_copy_ = true;
    return true;
  }

  std::vector<int64_t> perm_;
  ElementType type_ = ElementType::f32;
  size_t element_size_ = 4;
  bool reads_laid_out_ = false;   // may read the model's laid-out activations
  bool writes_laid_out_ = false;  // ... or write them
  bool row_copy_ = false;
  int64_t row_ = 1;     // elements per contiguous row
  int64_t rows_ = 1;    // rows in the output
  Dims outer_dims_;     // the output's axes outside the row, outermost first
  Dims outer_strides_;  // their strides in the input, in elements
};

// f32, or the u8/i8 activations of quantized models (ShuffleNet's channel shuffle).
std::unique_ptr<Kernel> make_transpose_kernel(const KernelRequest& request) {
  if (all_f32(request)) return create_kernel<TransposeKernel>(request);
  if (request.inputs.size() != 1 || request.outputs.size() != 1) return nullptr;
  const ElementType type = request.inputs[0].type;
  if ((type != ElementType::u8 && type != ElementType::i8) || request.outputs[0].type != type)
    return nullptr;
  return create_kernel<TransposeKernel>(request);
}

}  // namespace

void register_transpose(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Transpose", make_transpose_kernel);
}

}  // namespace troupe::kernels::onednn
