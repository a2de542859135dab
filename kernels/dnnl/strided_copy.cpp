// Slice, Split and Pad as strided copies: whole rows where the innermost axes are contiguous on
// both sides (memcpy, axes merged into the longest runs), element by element otherwise, the outer
// rows shared among the stream's threads when there are many. Pad's reflect, edge and wrap modes
// then fill the border from the copied interior, one axis at a time (ReflectionPad2d before every
// convolution of a CycleGAN generator took more than half its time in the reference kernel). The
// reference kernels walk every element through an index vector (a ViT's q/k/v Slice of [1,197,2304]
// took 21 ms there); the plans they read are shared (kernels/reference/slice_pad.hpp), so both take
// the same starts, steps and pads.

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/strided_copy.hpp"
#include "kernels/dnnl/team.hpp"
#include "kernels/reference/slice_pad.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

// Merges each axis into the one inside it wherever both sides store them as one run (a channel
// slice of a batch-1 NCHW tensor is a single block, not channels x rows copies of 28 floats), and
// drops axes of one element. The copy then moves the longest rows it can.
void coalesce(std::vector<int64_t>& dims, std::vector<int64_t>& src_strides,
              std::vector<int64_t>& dst_strides) {
  std::vector<int64_t> d, s, t;  // outermost first, as the inputs
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    d.push_back(dims[i]);
    s.push_back(src_strides[i]);
    t.push_back(dst_strides[i]);
  }
  for (size_t i = d.size(); i-- > 1;) {
    if (s[i - 1] != s[i] * d[i] || t[i - 1] != t[i] * d[i]) continue;
    d[i] *= d[i - 1];
    d.erase(d.begin() + static_cast<std::ptrdiff_t>(i) - 1);
    s.erase(s.begin() + static_cast<std::ptrdiff_t>(i) - 1);
    t.erase(t.begin() + static_cast<std::ptrdiff_t>(i) - 1);
  }
  if (d.empty() && !dims.empty()) {  // every axis of one element: one element
    d = {1};
    s = {1};
    t = {1};
  }
  dims = std::move(d);
  src_strides = std::move(s);
  dst_strides = std::move(t);
}

template <class T>
void copy_elements(const T* src, int64_t src_stride, T* dst, int64_t dst_stride, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dst[i * dst_stride] = src[i * src_stride];
}

}  // namespace

std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t d = dims.size(); d-- > 1;) strides[d - 1] = strides[d] * dims[d];
  return strides;
}

bool plain_data(const KernelRequest& r) {
  return r.input_layout(0) == TensorLayout{} && r.output_layout(0) == TensorLayout{};
}

void strided_copy(std::vector<int64_t> dims, const uint8_t* src, std::vector<int64_t> src_strides,
                  uint8_t* dst, std::vector<int64_t> dst_strides, size_t es) {
  for (int64_t d : dims)
    if (d == 0) return;
  coalesce(dims, src_strides, dst_strides);
  // A Slice's or Split's part the memory plan keeps inside its input is there already.
  if (src == dst && src_strides == dst_strides) return;
  const size_t rank = dims.size();
  if (rank == 0) {
    std::memcpy(dst, src, es);
    return;
  }
  const int64_t inner = dims[rank - 1];
  const bool rows = src_strides[rank - 1] == 1 && dst_strides[rank - 1] == 1;
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < rank; ++d) outer *= dims[d];
  const int64_t bytes = outer * inner * static_cast<int64_t>(es);
  // Threads pay only for copies of a few hundred kilobytes and more.
  for_each_index_if(bytes > (int64_t{1} << 18) && outer > 1, outer, [&](int64_t o) {
    int64_t s = 0, t = 0, rest = o;
    for (size_t d = rank - 1; d-- > 0;) {
      const int64_t i = rest % dims[d];
      rest /= dims[d];
      s += i * src_strides[d];
      t += i * dst_strides[d];
    }
    if (rows) {
      std::memcpy(dst + t * static_cast<int64_t>(es), src + s * static_cast<int64_t>(es),
                  static_cast<size_t>(inner) * es);
    } else if (es == 4 || es == 8 || es == 2 || es == 1) {
      // Element by element, as typed loads and stores (a 4-byte memcpy per element cost as much
      // again).
      const int64_t from = src_strides[rank - 1], to = dst_strides[rank - 1];
      switch (es) {
        case 4:
          copy_elements(reinterpret_cast<const uint32_t*>(src) + s, from,
                        reinterpret_cast<uint32_t*>(dst) + t, to, inner);
          break;
        case 8:
          copy_elements(reinterpret_cast<const uint64_t*>(src) + s, from,
                        reinterpret_cast<uint64_t*>(dst) + t, to, inner);
          break;
        case 2:
          copy_elements(reinterpret_cast<const uint16_t*>(src) + s, from,
                        reinterpret_cast<uint16_t*>(dst) + t, to, inner);
          break;
        default:
          copy_elements(src + s, from, dst + t, to, inner);
      }
    } else {
      for (int64_t i = 0; i < inner; ++i)
        std::memcpy(dst + (t + i * dst_strides[rank - 1]) * static_cast<int64_t>(es),
                    src + (s + i * src_strides[rank - 1]) * static_cast<int64_t>(es), es);
    }
  });
}

namespace {

class SliceKernel final : public Kernel {
 public:
  explicit SliceKernel(const KernelRequest& r) : node_(r.node) {}
  std::string implementation() const override { return "dnnl:strided_copy"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& in_dims = in[0].shape().dims();
    const reference::SlicePlan plan = reference::read_slice_plan(node_, in, in_dims);
    if (out[0].shape().dims() != plan.count)
      throw ExecutionError("Slice node '" + node_.name + "': output shape " +
                           out[0].shape().to_string() + " does not match the slice " +
                           Shape(plan.count).to_string());
    const std::vector<int64_t> in_strides = dense_strides(in_dims);
    std::vector<int64_t> src_strides(in_dims.size());
    int64_t offset = 0;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      src_strides[d] = in_strides[d] * plan.step[d];
      offset += plan.first[d] * in_strides[d];
    }
    const size_t es = element_size(in[0].element_type());
    strided_copy(plan.count,
                 static_cast<const uint8_t*>(in[0].raw_data()) + offset * static_cast<int64_t>(es),
                 src_strides, static_cast<uint8_t*>(out[0].raw_data()), dense_strides(plan.count),
                 es);
  }

 private:
  Node node_;
};

// Fills the padding of `dst` (dims `out`, the input already copied into its interior at
// `begin`) from the output itself, axis by axis from the innermost: along axis d each pad slab
// copies the slab the mode maps it to, and a slab spans every axis after d (already complete)
// while the axes before d walk their interior (their own padding is filled later, from slabs
// that include this one's).
void fill_padding(const std::string& mode, uint8_t* dst, const std::vector<int64_t>& out,
                  const std::vector<int64_t>& in, const std::vector<int64_t>& begin, size_t es) {
  const size_t rank = out.size();
  for (size_t d = rank; d-- > 0;) {
    if (out[d] == in[d]) continue;
    int64_t slab = static_cast<int64_t>(es);
    for (size_t i = d + 1; i < rank; ++i) slab *= out[i];
    int64_t outer = 1;
    for (size_t i = 0; i < d; ++i) outer *= in[i];
    // Each pad index along d and the index it copies.
    std::vector<std::pair<int64_t, int64_t>> copies;
    for (int64_t o = 0; o < out[d]; ++o)
      if (o < begin[d] || o >= begin[d] + in[d])
        copies.emplace_back(o, begin[d] + reference::pad_source(mode, o - begin[d], in[d]));
    const int64_t bytes = outer * static_cast<int64_t>(copies.size()) * slab;
    for_each_index_if(bytes > (int64_t{1} << 18) && outer > 1, outer, [&](int64_t o) {
      // The offset of interior position o of the axes before d.
      int64_t base = 0, rest = o, stride = slab * out[d];
      for (size_t i = d; i-- > 0;) {
        base += (begin[i] + rest % in[i]) * stride;
        rest /= in[i];
        stride *= out[i];
      }
      uint8_t* row = dst + base;
      if (slab == 4 && es == 4) {  // the innermost axis of f32 or i32: single elements
        auto* elements = reinterpret_cast<uint32_t*>(row);
        for (const auto& [to, from] : copies) elements[to] = elements[from];
      } else {
        for (const auto& [to, from] : copies)
          std::memcpy(row + to * slab, row + from * slab, static_cast<size_t>(slab));
      }
    });
  }
}

class PadKernel final : public Kernel {
 public:
  explicit PadKernel(const KernelRequest& r) : node_(r.node) {}
  std::string implementation() const override { return "dnnl:strided_copy"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const reference::PadPlan plan = reference::read_pad_plan(node_, in);
    const std::vector<int64_t>& in_dims = in[0].shape().dims();
    const std::vector<int64_t>& out_dims = out[0].shape().dims();
    // A negative pad crops (the factory takes them in constant mode only): the part of the data
    // that is copied starts `crop` elements in and `shift` elements into the output.
    std::vector<int64_t> crop(in_dims.size()), shift(in_dims.size()), kept(in_dims.size());
    bool cropped = false;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      crop[d] = std::max<int64_t>(0, -plan.begin[d]);
      shift[d] = std::max<int64_t>(0, plan.begin[d]);
      kept[d] = std::max<int64_t>(0, std::min(in_dims[d] - crop[d], out_dims[d] - shift[d]));
      cropped = cropped || kept[d] != in_dims[d];
    }
    if (cropped && plan.mode != "constant")
      throw ExecutionError("Pad node '" + node_.name + "': negative pads in mode " + plan.mode +
                           " reached the strided copy (the factory declines them)");
    const size_t es = element_size(in[0].element_type());
    auto* dst = static_cast<uint8_t*>(out[0].raw_data());
    const int64_t count = out[0].size();
    // An empty axis leaves nothing to mirror or repeat: every element is the constant then, as
    // in the reference kernel.
    const bool constant =
        plan.mode == "constant" || std::find(in_dims.begin(), in_dims.end(), 0) != in_dims.end();
    if (constant) {
      const auto* fill = static_cast<const uint8_t*>(plan.fill.raw_data());
      if (std::all_of(fill, fill + es, [](uint8_t b) { return b == 0; })) {
        std::memset(dst, 0, static_cast<size_t>(count) * es);
      } else if (count > 0) {
        // The value once, then the filled part copied after itself, doubling: a few long copies
        // (an element at a time took 14x a zero fill's time).
        std::memcpy(dst, fill, es);
        const size_t total = static_cast<size_t>(count) * es;
        for (size_t filled = es; filled < total; filled *= 2)
          std::memcpy(dst + filled, dst, std::min(filled, total - filled));
      }
    }
    const std::vector<int64_t> out_strides = dense_strides(out_dims);
    const std::vector<int64_t> in_strides = dense_strides(in_dims);
    int64_t from = 0, to = 0;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      from += crop[d] * in_strides[d];
      to += shift[d] * out_strides[d];
    }
    if (std::find(kept.begin(), kept.end(), 0) == kept.end())
      strided_copy(kept,
                   static_cast<const uint8_t*>(in[0].raw_data()) + from * static_cast<int64_t>(es),
                   in_strides, dst + to * static_cast<int64_t>(es), out_strides, es);
    if (constant || count == 0) return;
    fill_padding(plan.mode, dst, out_dims, in_dims, plan.begin, es);
  }

 private:
  Node node_;
};

// Each output of Split is a slice along the axis: the part the outputs before it do not take
// (their lengths are the shapes inference gave them, from the split input or attribute).
class SplitKernel final : public Kernel {
 public:
  explicit SplitKernel(const KernelRequest& r) : node_(r.node) {}
  std::string implementation() const override { return "dnnl:strided_copy"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    const std::vector<int64_t>& in_dims = in[0].shape().dims();
    const auto rank = static_cast<int64_t>(in_dims.size());
    int64_t axis = node_.attributes.get_int_or("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank)
      throw ExecutionError("Split node '" + node_.name + "': axis " +
                           std::to_string(node_.attributes.get_int_or("axis", 0)) +
                           " is outside the input's " + std::to_string(rank) + " axes");
    const auto a = static_cast<size_t>(axis);
    const std::vector<int64_t> in_strides = dense_strides(in_dims);
    const size_t es = element_size(in[0].element_type());
    int64_t first = 0;
    for (Tensor& part : out) {
      if (part.empty()) continue;
      const std::vector<int64_t>& dims = part.shape().dims();
      if (dims.size() != in_dims.size() || first + dims[a] > in_dims[a])
        throw ExecutionError("Split node '" + node_.name + "': output shape " +
                             part.shape().to_string() + " does not fit the input " +
                             in[0].shape().to_string() + " after " + std::to_string(first) +
                             " along axis " + std::to_string(axis));
      strided_copy(dims,
                   static_cast<const uint8_t*>(in[0].raw_data()) +
                       first * in_strides[a] * static_cast<int64_t>(es),
                   in_strides, static_cast<uint8_t*>(part.raw_data()), dense_strides(dims), es);
      first += dims[a];
    }
  }

 private:
  Node node_;
};

std::unique_ptr<Kernel> make_split(const KernelRequest& r) {
  if (auto laid_out = make_channel_split(r)) return laid_out;
  if (!plain_data(r)) return nullptr;
  for (size_t o = 0; o < r.outputs.size(); ++o)
    if (r.output_layout(o) != TensorLayout{}) return nullptr;
  return std::make_unique<SplitKernel>(r);
}

std::unique_ptr<Kernel> make_slice(const KernelRequest& r) {
  if (!plain_data(r)) return nullptr;
  return std::make_unique<SliceKernel>(r);
}

std::unique_ptr<Kernel> make_pad(const KernelRequest& r) {
  if (!plain_data(r)) return nullptr;
  // Negative pads crop: in constant mode the copy takes the data's part that is kept (RWKV's
  // token shift, ZeroPad2d((0, 0, 1, -1))); how the other modes mirror or repeat a cropped
  // edge is the reference kernel's. Pads known only at run time go to the reference.
  const bool constant_mode = r.node.attributes.get_string_or("mode", "constant") == "constant";
  if (r.constant_inputs.size() > 1 && r.constant_inputs[1] != nullptr) {
    const Tensor& pads = *r.constant_inputs[1];
    if (pads.element_type() != ElementType::i64) return nullptr;
    for (int64_t p : pads.to_vector<int64_t>())
      if (p < 0 && !constant_mode) return nullptr;
  } else if (r.inputs.size() > 1 && r.inputs[1].type != ElementType::undefined) {
    return nullptr;
  } else {
    for (int64_t p : r.node.attributes.get_ints_or("pads", {}))
      if (p < 0 && !constant_mode) return nullptr;
  }
  return std::make_unique<PadKernel>(r);
}

}  // namespace

void register_strided_copies(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Slice", make_slice);
  registry.add(backend_name, backend_priority, "Split", make_split);
  registry.add(backend_name, backend_priority, "Pad", make_pad);
}

}  // namespace troupe::kernels::onednn
