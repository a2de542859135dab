// Nearest-mode Resize as copies: each output row gathers its elements from one input row, by the
// per-axis indices the reference kernel's coordinate transform and rounding give
// (reference::nearest_source_indices), and an output row that reads the same input row as the
// one before it (an upsampling by 2 writes every row twice) is a copy of that row. The planes
// (all axes but the last two) are shared among the stream's threads when the tensor is large.
// The reference kernel walked every output element through all its axes: a 2x upsampling of
// [1,64,80,80] took 9.4 ms there.
// A 4-D or 5-D activation resized along its spatial axes alone is read and written in the model's
// activation layout, where a pixel's channels (channels-last) or a block of them (blocked) move
// as one unit: in plain tensors only, the upsampling between convolutions cost a reorder on each
// side (GhostNetV2's attention gates, [1,72,28,28] to 56x56, were multiplied with a
// channels-last tensor after a reorder of the upsampled gate).
#include "kernels/dnnl/nearest_resize.hpp"
#include "kernels/dnnl/chunked_loop.hpp"
#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/team.hpp"

#include <omp.h>

#include <cstring>
#include <string>
#include <vector>

#include "engine/ops/resize.hpp"
#include "kernels/reference/resize.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

template <class T>
void gather_row(const T* src, const int64_t* index, int64_t count, T* dst) {
  for (int64_t j = 0; j < count; ++j) dst[j] = src[index[j]];
}

void gather_row(const uint8_t* src, const int64_t* index, int64_t count, uint8_t* dst, size_t es) {
  switch (es) {
    case 1:
      return gather_row(src, index, count, dst);
    case 2:
      return gather_row(reinterpret_cast<const uint16_t*>(src), index, count,
                        reinterpret_cast<uint16_t*>(dst));
    case 4:
      return gather_row(reinterpret_cast<const uint32_t*>(src), index, count,
                        reinterpret_cast<uint32_t*>(dst));
    case 8:
      return gather_row(reinterpret_cast<const uint64_t*>(src), index, count,
                        reinterpret_cast<uint64_t*>(dst));
    default:
      for (int64_t j = 0; j < count; ++j) std::memcpy(dst + j * es, src + index[j] * es, es);
  }
}

// Copies `count` units of `unit_bytes` from `src` at units `index[j]` to `dst`.
void gather_units(const uint8_t* src, const int64_t* index, int64_t count, uint8_t* dst,
                  size_t unit_bytes) {
  if (unit_bytes <= 8 && (unit_bytes & (unit_bytes - 1)) == 0)
    return gather_row(src, index, count, dst, unit_bytes);
  for (int64_t j = 0; j < count; ++j)
    std::memcpy(dst + static_cast<size_t>(j) * unit_bytes,
                src + static_cast<size_t>(index[j]) * unit_bytes, unit_bytes);
}

bool is_identity(const std::vector<int64_t>& index) {
  for (size_t i = 0; i < index.size(); ++i)
    if (index[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Nearest Resize of a plain tensor of any element type and rank, as row copies.
void resize_plain_rows(const Node& node, const std::vector<Tensor>& inputs,
                       std::vector<Tensor>& outputs) {
  const Tensor x = inputs.at(0).contiguous();
  Tensor& y = outputs.at(0);
  const std::vector<int64_t>& in_dims = x.shape().dims();
  const std::vector<int64_t>& out_dims = y.shape().dims();
  std::vector<std::vector<int64_t>> index =
      reference::nearest_source_indices(node, inputs, out_dims);
  if (index.empty() || in_dims.empty() || x.element_type() != y.element_type()) {
    reference::resize(node, inputs, outputs);  // extrapolation: the reference's alone
    return;
  }
  if (y.size() == 0) return;
  // As [planes, rows, columns]: a tensor of rank 1 is one row, of rank 2 one plane.
  const size_t rank = in_dims.size();
  const int64_t columns = out_dims[rank - 1];
  const int64_t rows = rank >= 2 ? out_dims[rank - 2] : 1;
  const int64_t in_columns = in_dims[rank - 1];
  const int64_t in_rows = rank >= 2 ? in_dims[rank - 2] : 1;
  const size_t leading = rank >= 2 ? rank - 2 : 0;  // the axes numbering the planes
  int64_t planes = 1;
  for (size_t a = 0; a < leading; ++a) planes *= out_dims[a];
  const std::vector<int64_t> row_index = rank >= 2 ? index[rank - 2] : std::vector<int64_t>{0};
  const std::vector<int64_t>& column_index = index[rank - 1];
  const size_t es = element_size(x.element_type());
  const auto* src = static_cast<const uint8_t*>(x.raw_data());
  auto* dst = static_cast<uint8_t*>(y.raw_data());
  const int64_t row_bytes = columns * static_cast<int64_t>(es);
  const int64_t total_bytes = y.size() * static_cast<int64_t>(es);
  // Threads pay only for a few hundred kilobytes and more.
  for_each_index_if(total_bytes > (int64_t{1} << 18) && planes > 1, planes, [&](int64_t p) {
    // The input plane this output plane copies: the leading axes' indices, row-major.
    int64_t in_plane = 0, rest = p, stride = 1;
    for (size_t a = leading; a-- > 0;) {
      const int64_t o = rest % out_dims[a];
      rest /= out_dims[a];
      in_plane += index[a][static_cast<size_t>(o)] * stride;
      stride *= in_dims[a];
    }
    const uint8_t* plane_src = src + in_plane * in_rows * in_columns * static_cast<int64_t>(es);
    uint8_t* plane_dst = dst + p * rows * row_bytes;
    for (int64_t r = 0; r < rows; ++r) {
      uint8_t* out = plane_dst + r * row_bytes;
      const int64_t source_row = row_index[static_cast<size_t>(r)];
      if (r > 0 && row_index[static_cast<size_t>(r - 1)] == source_row) {
        std::memcpy(out, out - row_bytes, static_cast<size_t>(row_bytes));
        continue;
      }
      gather_row(plane_src + source_row * in_columns * static_cast<int64_t>(es),
                 column_index.data(), columns, out, es);
    }
  });
}

class LaidOutNearestResizeKernel final : public DnnlKernel {
 public:
  explicit LaidOutNearestResizeKernel(const KernelRequest& request) : DnnlKernel(request) {
    if (request.outputs.size() != 1) throw Unsupported{};
    const Shape& x = request.inputs[0].shape;
    const Shape& y = request.outputs[0].shape;
    if ((x.rank() != 4 && x.rank() != 5) || y.rank() != x.rank() || !x.is_static() ||
        !y.is_static() || x[0] != y[0] || x[1] != y[1] || y.element_count() == 0)
      throw Unsupported{};
    const resize::Attributes attributes = resize::read_attributes(request.node);
    if (attributes.mode != resize::Mode::nearest ||
        attributes.coordinate_mode == resize::CoordinateMode::tf_crop_and_resize)
      throw Unsupported{};
  }

  TensorLayout preferred_input_layout(size_t i) const override {
    return i == 0 ? stored_layout(activation_layout()) : TensorLayout{};
  }
  TensorLayout preferred_output_layout(size_t o) const override {
    return o == 0 ? stored_layout(activation_layout()) : TensorLayout{};
  }
  bool stores_one_type() const override { return true; }

 protected:
  bool layouts_known_unprepared() const override { return true; }

  bool prepare(const std::vector<Shape>& inputs, const std::vector<Shape>& /*outputs*/) override {
    layout_ = input_layout(0);
    if (output_layout(0) != layout_) return false;
    // The graph compiler lays out only tensors whose channels fill whole blocks.
    if (layout_.channel_block > 0 && inputs[0][1] % layout_.channel_block != 0) return false;
    element_bytes_ = layout_.bf16 ? 2 : sizeof(float);
    set_impl(layout_.bf16 ? "nearest_rows/bf16" : "nearest_rows");
    return true;
  }

  void run(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    if (layout_.is_plain()) return resize_plain_rows(node_, inputs, outputs);
    const std::vector<int64_t>& in_dims = inputs[0].shape().dims();
    const std::vector<int64_t>& out_dims = outputs[0].shape().dims();
    const std::vector<std::vector<int64_t>> index =
        reference::nearest_source_indices(node_, inputs, out_dims);
    const size_t rank = out_dims.size();
    const int64_t channels = out_dims[1];
    // Rows: the spatial positions but the last axis', each row of out_dims[rank - 1] columns.
    int64_t rows = 1, in_rows = 1;
    for (size_t a = 2; a + 1 < rank; ++a) rows *= out_dims[a], in_rows *= in_dims[a];
    const int64_t columns = out_dims[rank - 1], in_columns = in_dims[rank - 1];
    // The input row each output row copies (an odometer over the row axes).
    std::vector<int64_t> source_row(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      int64_t rest = r, source = 0, stride = 1;
      for (size_t a = rank - 1; a-- > 2;) {
        source += index[a][static_cast<size_t>(rest % out_dims[a])] * stride;
        rest /= out_dims[a];
        stride *= in_dims[a];
      }
      source_row[static_cast<size_t>(r)] = source;
    }
    const std::vector<int64_t>& n_index = index[0];
    const std::vector<int64_t>& c_index = index[1];
    if (!is_identity(c_index)) {
      run_elements(inputs[0], outputs[0], index, source_row, in_rows * in_columns);
      return;
    }
    // Planes of rows of units: an image of pixels of all channels (channels-last), a block's
    // image of pixels of `block` channels (blocked).
    const int64_t unit = layout_.channels_last ? channels : layout_.channel_block;
    const int64_t planes_per_image = layout_.channels_last ? 1 : channels / unit;
    const int64_t planes = out_dims[0] * planes_per_image;
    const size_t unit_bytes = static_cast<size_t>(unit) * element_bytes_;
    const size_t row_bytes = static_cast<size_t>(columns) * unit_bytes;
    const size_t in_row_bytes = static_cast<size_t>(in_columns) * unit_bytes;
    const auto* src = static_cast<const uint8_t*>(inputs[0].raw_data());
    auto* dst = static_cast<uint8_t*>(outputs[0].raw_data());
    const int64_t* column_index = index[rank - 1].data();
    for_each_chunk_of_units(planes * rows, columns * unit, [&](int64_t begin, int64_t count) {
      for (int64_t t = begin; t < begin + count; ++t) {
        const int64_t p = t / rows, r = t % rows;
        const int64_t image = p / planes_per_image, part = p % planes_per_image;
        const int64_t source_plane = n_index[static_cast<size_t>(image)] * planes_per_image + part;
        uint8_t* out = dst + static_cast<size_t>(t) * row_bytes;
        if (t > begin && r > 0 &&
            source_row[static_cast<size_t>(r - 1)] == source_row[static_cast<size_t>(r)]) {
          std::memcpy(out, out - row_bytes, row_bytes);  // an upsampling's repeated row
          continue;
        }
        const uint8_t* in =
            src + static_cast<size_t>(source_plane * in_rows + source_row[static_cast<size_t>(r)]) *
                      in_row_bytes;
        gather_units(in, column_index, columns, out, unit_bytes);
      }
    });
  }

 private:
  // Element by element, for an index that moves channels within a laid-out tensor (a scale
  // other than 1 on the channel axis that still keeps its length).
  void run_elements(const Tensor& x, Tensor& y, const std::vector<std::vector<int64_t>>& index,
                    const std::vector<int64_t>& source_row, int64_t in_positions) const {
    const std::vector<int64_t>& out_dims = y.shape().dims();
    const size_t rank = out_dims.size();
    const int64_t channels = out_dims[1], columns = out_dims[rank - 1];
    const int64_t positions = y.size() / (out_dims[0] * channels);
    const int64_t in_columns = x.shape().dims()[rank - 1];
    const int64_t block = layout_.channel_block;
    // Element offset of (image, channel, spatial position) in the layout.
    auto offset = [&](int64_t n, int64_t c, int64_t s, int64_t spatial) {
      if (layout_.channels_last) return (n * spatial + s) * channels + c;
      return ((n * (channels / block) + c / block) * spatial + s) * block + c % block;
    };
    const auto* src = static_cast<const uint8_t*>(x.raw_data());
    auto* dst = static_cast<uint8_t*>(y.raw_data());
    for (int64_t n = 0; n < out_dims[0]; ++n)
      for (int64_t c = 0; c < channels; ++c)
        for (int64_t s = 0; s < positions; ++s) {
          const int64_t source = source_row[static_cast<size_t>(s / columns)] * in_columns +
                                 index[rank - 1][static_cast<size_t>(s % columns)];
          std::memcpy(dst + offset(n, c, s, positions) * static_cast<int64_t>(element_bytes_),
                      src + offset(index[0][static_cast<size_t>(n)],
                                   index[1][static_cast<size_t>(c)], source, in_positions) *
                                static_cast<int64_t>(element_bytes_),
                      element_bytes_);
        }
  }

  TensorLayout layout_;
  size_t element_bytes_ = sizeof(float);
};

class NearestResizeKernel final : public Kernel {
 public:
  explicit NearestResizeKernel(const KernelRequest& request) : node_(request.node) {}
  std::string implementation() const override { return "dnnl:nearest_rows"; }

  void execute(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs) override {
    resize_plain_rows(node_, inputs, outputs);
  }

 private:
  Node node_;
};

}  // namespace

std::unique_ptr<Kernel> make_nearest_resize(const KernelRequest& request) {
  if (auto laid_out = make_kernel_for_data<LaidOutNearestResizeKernel>(request)) return laid_out;
  if (request.input_layout(0) != TensorLayout{} || request.output_layout(0) != TensorLayout{})
    return nullptr;
  if (request.outputs.size() != 1 || request.inputs.empty() ||
      request.inputs[0].type != request.outputs[0].type)
    return nullptr;
  if (resize::read_attributes(request.node).mode != resize::Mode::nearest) return nullptr;
  return std::make_unique<NearestResizeKernel>(request);
}

}  // namespace troupe::kernels::onednn
