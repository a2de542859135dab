// Reference kernels of the data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Identity,
// Dropout (inference), Shape, Transpose, Concat, Split, Expand, Tile, ConstantOfShape, Range,
// Gather, GatherElements, GatherND, ScatterND, ScatterElements (and Scatter), Slice, Pad, Size,
// Trilu, OneHot, EyeLike and ReverseSequence. None of them does arithmetic on the elements,
// so most work on bytes: an element is `element_size(type)` bytes copied as a whole.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reference/broadcast.hpp"
#include "kernels/reference/common.hpp"
#include "kernels/reference/element_types.hpp"
#include "kernels/reference/reference.hpp"
#include "kernels/reference/slice_pad.hpp"
#include "kernels/reference/transpose.hpp"

namespace troupe::kernels::reference {

namespace {

using Tensors = std::vector<Tensor>;

const uint8_t* bytes(const Tensor& t) {
  return static_cast<const uint8_t*>(t.raw_data());
}
uint8_t* bytes(Tensor& t) {
  return static_cast<uint8_t*>(t.raw_data());
}

// memcpy that accepts the null pointers of empty tensors.
void copy_bytes(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n != 0 && dst != src) std::memcpy(dst, src, n);  // a Concat's part may be in place
}

void require_output_type(const Node& node, const Tensor& in, const Tensor& out) {
  if (in.element_type() != out.element_type())
    fail(node, "output element type " + std::string(to_string(out.element_type())) +
                   " differs from the input's " + std::string(to_string(in.element_type())));
}

// The ops that only reinterpret the shape: the elements are copied unchanged, in order.
void copy_elements(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  if (in[0].size() != out[0].size())
    fail(node, "input " + in[0].shape().to_string() + " and output " + out[0].shape().to_string() +
                   " differ in element count");
  if (in[0].element_type() == ElementType::string) {  // objects: assigned one by one
    in[0].contiguous().reshaped(out[0].shape()).copy_to(out[0]);
    return;
  }
  // The memory plan stores a view's output in its input's buffer: nothing to copy then.
  if (out[0].raw_data() != in[0].raw_data())
    copy_bytes(bytes(out[0]), bytes(in[0]), in[0].byte_size());
}

void dropout(const Node& node, const Tensors& in, Tensors& out) {
  // Inference (or training with ratio 0): the data passes unchanged and the mask keeps everything.
  const bool training = in.size() > 2 && !in[2].empty() && in[2].value_at(0) != 0;
  const bool drops = in.size() < 2 || in[1].empty() || in[1].value_at(0) != 0;
  if (training && drops) fail(node, "training_mode=true is not supported (inference only)");
  copy_elements(node, in, out);
  if (out.size() > 1 && !out[1].empty()) {
    bool* mask = out[1].data<bool>();
    std::fill(mask, mask + out[1].size(), true);
  }
}

void shape(const Node& node, const Tensors& in, Tensors& out) {
  const auto rank = static_cast<int64_t>(in[0].shape().rank());
  int64_t start = node.attributes.get_int_or("start", 0);
  int64_t end = node.attributes.get_int_or("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  require_output_size(node, out[0], std::max<int64_t>(end - start, 0));
  int64_t* y = out[0].data<int64_t>();
  for (int64_t d = start; d < end; ++d) y[d - start] = in[0].shape()[static_cast<size_t>(d)];
}

}  // namespace

void transpose(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& in_dims = in[0].shape().dims();
  const size_t rank = in_dims.size();
  std::vector<int64_t> perm;
  if (node.attributes.has("perm")) {
    perm = node.attributes.get_ints("perm");
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != rank) fail(node, "perm does not match the input rank");
  std::vector<int64_t> out_dims(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank)) fail(node, "perm is out of range");
    out_dims[i] = in_dims[static_cast<size_t>(perm[i])];
  }
  if (out[0].shape().dims() != out_dims)
    fail(node, "output shape " + out[0].shape().to_string() + " is not the transposed " +
                   Shape(out_dims).to_string());

  // Output dimension i walks input dimension perm[i].
  const std::vector<int64_t> in_strides = dense_strides(in_dims);
  const size_t es = element_size(in[0].element_type());
  for (int64_t flat = 0; flat < out[0].size(); ++flat) {
    const std::vector<int64_t> index = unravel(flat, out_dims);
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += index[i] * in_strides[static_cast<size_t>(perm[i])];
    std::memcpy(bytes(out[0]) + flat * es, bytes(in[0]) + src * es, es);
  }
}

namespace {

// Sizes of the dimensions before and after `axis`.
std::pair<int64_t, int64_t> outer_inner(const std::vector<int64_t>& dims, size_t axis) {
  int64_t outer = 1;
  int64_t inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  return {outer, inner};
}

void concat(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& out_dims = out[0].shape().dims();
  const size_t axis = normalize_axis(node, node.attributes.get_int("axis"), out_dims.size());
  const auto [outer, inner] = outer_inner(out_dims, axis);
  const size_t es = element_size(out[0].element_type());
  int64_t total = 0;
  for (const Tensor& t : in) {
    if (t.shape().rank() != out_dims.size() || t.size() != outer * t.shape()[axis] * inner)
      fail(node, "input shape " + t.shape().to_string() + " does not fit output shape " +
                     out[0].shape().to_string());
    total += t.size();
  }
  require_output_size(node, out[0], total);
  // Each outer slice of the output is the inputs' outer slices one after the other.
  uint8_t* dst = bytes(out[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& t : in) {
      require_output_type(node, t, out[0]);
      const size_t chunk = static_cast<size_t>(t.shape()[axis] * inner) * es;
      copy_bytes(dst, bytes(t) + static_cast<size_t>(o) * chunk, chunk);
      dst += chunk;
    }
  }
}

void split(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& in_dims = in[0].shape().dims();
  const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 0), in_dims.size());
  const auto [outer, inner] = outer_inner(in_dims, axis);
  const size_t es = element_size(in[0].element_type());
  int64_t total = 0;
  for (const Tensor& t : out) {
    if (t.shape().rank() != in_dims.size() || t.size() != outer * t.shape()[axis] * inner)
      fail(node, "output shape " + t.shape().to_string() + " does not fit input shape " +
                     in[0].shape().to_string());
    total += t.shape()[axis];
  }
  if (total != in_dims[axis])
    fail(node, "the outputs' sizes along axis " + std::to_string(axis) + " sum to " +
                   std::to_string(total) + ", not " + std::to_string(in_dims[axis]));
  // The inverse of concat: each outer slice of the input is dealt out to the outputs in turn.
  const uint8_t* src = bytes(in[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (Tensor& t : out) {
      require_output_type(node, in[0], t);
      const size_t chunk = static_cast<size_t>(t.shape()[axis] * inner) * es;
      copy_bytes(bytes(t) + static_cast<size_t>(o) * chunk, src, chunk);
      src += chunk;
    }
  }
}

void expand(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const size_t es = element_size(in[0].element_type());
  BroadcastWalker walk(node, out[0].shape(), {in[0].shape()});
  for (int64_t i = 0; i < out[0].size(); ++i, walk.next())
    std::memcpy(bytes(out[0]) + i * es, bytes(in[0]) + walk.offset(0) * es, es);
}

void tile(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& in_dims = in[0].shape().dims();
  const std::vector<int64_t>& out_dims = out[0].shape().dims();
  const std::vector<int64_t> repeats = read_ints(node, in[1], "repeats");
  if (repeats.size() != in_dims.size()) fail(node, "repeats does not match the input rank");
  for (size_t d = 0; d < in_dims.size(); ++d)
    if (out_dims[d] != in_dims[d] * repeats[d]) fail(node, "output shape does not match repeats");
  // Output index i along a dimension of input size n reads input index i mod n.
  const std::vector<int64_t> in_strides = dense_strides(in_dims);
  const size_t es = element_size(in[0].element_type());
  for (int64_t flat = 0; flat < out[0].size(); ++flat) {
    const std::vector<int64_t> index = unravel(flat, out_dims);
    int64_t src = 0;
    for (size_t d = 0; d < index.size(); ++d) src += (index[d] % in_dims[d]) * in_strides[d];
    std::memcpy(bytes(out[0]) + flat * es, bytes(in[0]) + src * es, es);
  }
}

void constant_of_shape(const Node& node, const Tensors& in, Tensors& out) {
  Tensor value;
  if (node.attributes.has("value")) {
    value = node.attributes.get_tensor("value").contiguous();
  } else {
    value = Tensor(ElementType::f32, Shape{1});  // zero
  }
  require_output_type(node, value, out[0]);
  const size_t es = element_size(value.element_type());
  for (int64_t i = 0; i < out[0].size(); ++i) std::memcpy(bytes(out[0]) + i * es, bytes(value), es);
}

void range(const Node& node, const Tensors& in, Tensors& out) {
  dispatch_numeric(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t i = 1; i < 3; ++i)
      if (in[i].element_type() != in[0].element_type())
        fail(node, "start, limit and delta must have the same element type");
    const auto start = load(in[0].data<T>()[0]);
    const auto limit = load(in[1].data<T>()[0]);
    const auto delta = load(in[2].data<T>()[0]);
    if (delta == 0) fail(node, "delta must not be 0");
    const double count = std::ceil(static_cast<double>(limit - start) / static_cast<double>(delta));
    const int64_t n = std::max<int64_t>(static_cast<int64_t>(count), 0);
    if (out[0].size() != n)
      fail(node, "output shape " + out[0].shape().to_string() + " does not hold the " +
                     std::to_string(n) + " elements of the range");
    T* y = out[0].data<T>();
    for (int64_t i = 0; i < n; ++i)
      y[i] = store<T>(start + static_cast<decltype(start)>(i) * delta);
  });
}

void gather(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& data_dims = in[0].shape().dims();
  const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 0), data_dims.size());
  const auto [outer, inner] = outer_inner(data_dims, axis);
  const int64_t axis_size = data_dims[axis];
  const std::vector<int64_t> indices = read_ints(node, in[1], "indices");
  const size_t es = element_size(in[0].element_type());
  const size_t row = static_cast<size_t>(inner) * es;
  require_output_size(node, out[0], outer * static_cast<int64_t>(indices.size()) * inner);
  // Output = for each outer slice, the data rows selected by the indices, in index order.
  uint8_t* dst = bytes(out[0]);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t index : indices) {
      const int64_t i = index < 0 ? index + axis_size : index;
      if (i < 0 || i >= axis_size)
        fail(node, "index " + std::to_string(index) + " is out of range for axis " +
                       std::to_string(axis) + " of size " + std::to_string(axis_size));
      copy_bytes(dst, bytes(in[0]) + static_cast<size_t>(o * axis_size + i) * row, row);
      dst += row;
    }
  }
}

}  // namespace

namespace {

void slice(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& in_dims = in[0].shape().dims();
  const SlicePlan plan = read_slice_plan(node, in, in_dims);
  if (out[0].shape().dims() != plan.count)
    fail(node, "output shape " + out[0].shape().to_string() + " does not match the slice " +
                   Shape(plan.count).to_string());

  const std::vector<int64_t> in_strides = dense_strides(in_dims);
  const size_t es = element_size(in[0].element_type());
  for (int64_t flat = 0; flat < out[0].size(); ++flat) {
    const std::vector<int64_t> index = unravel(flat, plan.count);
    int64_t src = 0;
    for (size_t d = 0; d < in_dims.size(); ++d)
      src += (plan.first[d] + index[d] * plan.step[d]) * in_strides[d];
    std::memcpy(bytes(out[0]) + flat * es, bytes(in[0]) + src * es, es);
  }
}

}  // namespace

int64_t pad_source(const std::string& mode, int64_t i, int64_t n) {
  if (i >= 0 && i < n) return i;
  if (mode == "constant" || n == 0) return -1;
  if (mode == "edge") return std::clamp<int64_t>(i, 0, n - 1);
  if (mode == "wrap") return ((i % n) + n) % n;
  // reflect: mirror at both ends without repeating the edge element; period 2(n-1).
  if (n == 1) return 0;
  const int64_t period = 2 * (n - 1);
  int64_t r = i % period;
  if (r < 0) r += period;
  return r < n ? r : period - r;
}

PadPlan read_pad_plan(const Node& node, const Tensors& in) {
  const size_t rank = in[0].shape().rank();
  PadPlan plan;
  plan.mode = node.attributes.get_string_or("mode", "constant");
  if (plan.mode != "constant" && plan.mode != "reflect" && plan.mode != "edge" &&
      plan.mode != "wrap")
    fail(node, "unknown mode '" + plan.mode + "'");

  const std::vector<int64_t> pads = in.size() > 1 && !in[1].empty()
                                        ? read_ints(node, in[1], "pads")
                                        : node.attributes.get_ints("pads");
  std::vector<size_t> axes;
  if (in.size() > 3 && !in[3].empty()) {
    for (int64_t a : read_ints(node, in[3], "axes")) axes.push_back(normalize_axis(node, a, rank));
  } else {
    for (size_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  if (pads.size() != 2 * axes.size()) fail(node, "pads has the wrong length");
  plan.begin.assign(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) plan.begin[axes[i]] = pads[i];

  // The fill value, as one element of the data's type.
  plan.fill = Tensor(in[0].element_type(), Shape{});
  if (in.size() > 2 && !in[2].empty()) {
    if (in[2].element_type() != in[0].element_type())
      fail(node, "constant_value must have the data's element type");
    std::memcpy(bytes(plan.fill), bytes(in[2]), element_size(in[0].element_type()));
  } else if (node.attributes.has("value")) {
    const double v = node.attributes.get_float("value");
    dispatch_any(node, in[0].element_type(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      plan.fill.data<T>()[0] = store<T>(v);
    });
  }
  return plan;
}

namespace {

void pad(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& in_dims = in[0].shape().dims();
  const PadPlan plan = read_pad_plan(node, in);
  const size_t es = element_size(in[0].element_type());
  const std::vector<int64_t>& out_dims = out[0].shape().dims();
  const std::vector<int64_t> in_strides = dense_strides(in_dims);
  for (int64_t flat = 0; flat < out[0].size(); ++flat) {
    const std::vector<int64_t> index = unravel(flat, out_dims);
    int64_t src = 0;
    bool inside = true;
    for (size_t d = 0; d < in_dims.size() && inside; ++d) {
      const int64_t s = pad_source(plan.mode, index[d] - plan.begin[d], in_dims[d]);
      inside = s >= 0;
      src += s * in_strides[d];
    }
    std::memcpy(bytes(out[0]) + flat * es, inside ? bytes(in[0]) + src * es : bytes(plan.fill), es);
  }
}

// The channel c' of a [N, C', H', W'] DepthToSpace output pixel (y, x) comes from the input
// channel holding block offset (y % b, x % b): block-major (DCR) or channel-major (CRD).
// SpaceToDepth runs the same mapping the other way (DCR).
void depth_space(const Node& node, const Tensors& in, Tensors& out, bool to_space) {
  require_output_type(node, in[0], out[0]);
  require_output_size(node, out[0], in[0].size());
  const int64_t b = node.attributes.get_int("blocksize");
  const bool crd = to_space && node.attributes.get_string_or("mode", "DCR") == "CRD";
  // Dimensions of the space side [N, c, H, W] and the depth side [N, c * b², H / b, W / b].
  const std::vector<int64_t>& space_dims = to_space ? out[0].shape().dims() : in[0].shape().dims();
  const int64_t n = space_dims[0];
  const int64_t c = space_dims[1];
  const int64_t h = space_dims[2];
  const int64_t w = space_dims[3];
  const size_t es = element_size(in[0].element_type());
  const uint8_t* src = bytes(in[0]);
  uint8_t* dst = bytes(out[0]);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const int64_t offset = (y % b) * b + x % b;
          const int64_t depth_channel = crd ? ch * b * b + offset : offset * c + ch;
          const int64_t space = ((i * c + ch) * h + y) * w + x;
          const int64_t depth =
              ((i * c * b * b + depth_channel) * (h / b) + y / b) * (w / b) + x / b;
          std::memcpy(dst + (to_space ? space : depth) * static_cast<int64_t>(es),
                      src + (to_space ? depth : space) * static_cast<int64_t>(es), es);
        }
}

void depth_to_space(const Node& node, const Tensors& in, Tensors& out) {
  depth_space(node, in, out, true);
}

void space_to_depth(const Node& node, const Tensors& in, Tensors& out) {
  depth_space(node, in, out, false);
}

void size(const Node& node, const Tensors& in, Tensors& out) {
  require_output_size(node, out[0], 1);
  out[0].data<int64_t>()[0] = in[0].size();
}

// Keeps the upper (or lower) triangle of the last two dimensions, shifted by the diagonal offset k
// (input 1, default 0); everything else becomes zero.
void trilu(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& dims = in[0].shape().dims();
  if (dims.size() < 2) fail(node, "input must have rank >= 2");
  require_output_size(node, out[0], in[0].size());
  const bool upper = node.attributes.get_int_or("upper", 1) != 0;
  int64_t k = 0;
  if (in.size() > 1 && !in[1].empty()) {
    const std::vector<int64_t> given = read_ints(node, in[1], "k");
    if (given.size() != 1) fail(node, "k must hold exactly one value");
    k = given[0];
  }
  const int64_t rows = dims[dims.size() - 2];
  const int64_t cols = dims[dims.size() - 1];
  const size_t es = element_size(in[0].element_type());
  for (int64_t flat = 0; flat < in[0].size(); ++flat) {
    const int64_t row = flat / cols % rows;
    const int64_t col = flat % cols;
    const bool keep = upper ? col - row >= k : col - row <= k;
    if (keep)
      std::memcpy(bytes(out[0]) + flat * es, bytes(in[0]) + flat * es, es);
    else
      std::memset(bytes(out[0]) + flat * es, 0, es);  // all-zero bits are 0 in every type
  }
}

// out[idx] = data[idx with idx[axis] replaced by indices[idx]].
void gather_elements(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& data_dims = in[0].shape().dims();
  const std::vector<int64_t>& index_dims = in[1].shape().dims();
  if (index_dims.size() != data_dims.size()) fail(node, "indices must have the rank of data");
  const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 0), data_dims.size());
  const std::vector<int64_t> indices = read_ints(node, in[1], "indices");
  require_output_size(node, out[0], in[1].size());
  const std::vector<int64_t> data_strides = dense_strides(data_dims);
  const size_t es = element_size(in[0].element_type());
  for (int64_t flat = 0; flat < in[1].size(); ++flat) {
    std::vector<int64_t> index = unravel(flat, index_dims);
    int64_t i = indices[static_cast<size_t>(flat)];
    if (i < 0) i += data_dims[axis];
    if (i < 0 || i >= data_dims[axis])
      fail(node, "index " + std::to_string(indices[static_cast<size_t>(flat)]) +
                     " is out of range for axis " + std::to_string(axis) + " of size " +
                     std::to_string(data_dims[axis]));
    index[axis] = i;
    int64_t src = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      if (index[d] >= data_dims[d]) fail(node, "indices shape exceeds data shape");
      src += index[d] * data_strides[d];
    }
    std::memcpy(bytes(out[0]) + flat * es, bytes(in[0]) + src * es, es);
  }
}

// An update replaces its target, or is combined with it by the scatter's `reduction`.
template <class T>
void scatter_combine(T& target, const T& update, const std::string& reduction) {
  if (reduction == "add")
    target = store<T>(load(target) + load(update));
  else if (reduction == "mul")
    target = store<T>(load(target) * load(update));
  else if (reduction == "max")
    target = store<T>(std::max(load(target), load(update)));
  else if (reduction == "min")
    target = store<T>(std::min(load(target), load(update)));
  else
    target = update;
}

// ScatterND: a copy of data, then each index tuple's slice replaced by (or combined with) its
// slice of updates, in index order (so with reduction none a repeated index keeps the last).
void scatter_nd(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  require_output_size(node, out[0], in[0].size());
  const std::vector<int64_t>& data_dims = in[0].shape().dims();
  const std::vector<int64_t>& index_dims = in[1].shape().dims();
  const auto k = static_cast<size_t>(index_dims.back());
  int64_t slice_size = 1;
  for (size_t d = k; d < data_dims.size(); ++d) slice_size *= data_dims[d];
  const int64_t tuples = in[1].size() / static_cast<int64_t>(k);
  if (in[2].size() != tuples * slice_size)
    fail(node, "updates has " + std::to_string(in[2].size()) + " elements, expected " +
                   std::to_string(tuples * slice_size));
  const std::vector<int64_t> indices = read_ints(node, in[1], "indices");
  const std::vector<int64_t> data_strides = dense_strides(data_dims);
  const std::string reduction = node.attributes.get_string_or("reduction", "none");
  std::memcpy(bytes(out[0]), bytes(in[0]),
              static_cast<size_t>(in[0].size()) * element_size(in[0].element_type()));
  dispatch_any(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* updates = in[2].data<T>();
    T* y = out[0].data<T>();
    for (int64_t t = 0; t < tuples; ++t) {
      int64_t offset = 0;
      for (size_t d = 0; d < k; ++d) {
        int64_t i = indices[static_cast<size_t>(t) * k + d];
        const int64_t dim = data_dims[d];
        if (i < 0) i += dim;
        if (i < 0 || i >= dim)
          fail(node, "index " + std::to_string(indices[static_cast<size_t>(t) * k + d]) +
                         " is out of range for axis " + std::to_string(d) + " of size " +
                         std::to_string(dim));
        offset += i * data_strides[d];
      }
      for (int64_t e = 0; e < slice_size; ++e) {
        scatter_combine(y[offset + e], updates[t * slice_size + e], reduction);
      }
    }
  });
}

// The in-range form of `index` along a dimension of size `dim` (negative counts from the end);
// fails naming the index otherwise.
int64_t checked_index(const Node& node, int64_t index, int64_t dim, size_t axis) {
  const int64_t i = index < 0 ? index + dim : index;
  if (i < 0 || i >= dim)
    fail(node, "index " + std::to_string(index) + " is out of range for axis " +
                   std::to_string(axis) + " of size " + std::to_string(dim));
  return i;
}

// GatherND: for each batch entry (the first batch_dims dimensions, shared by data and indices),
// each index tuple of length k copies the slice data[batch, i_0, ..., i_k-1, :...].
void gather_nd(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  const std::vector<int64_t>& data_dims = in[0].shape().dims();
  const std::vector<int64_t>& index_dims = in[1].shape().dims();
  const auto b = static_cast<size_t>(node.attributes.get_int_or("batch_dims", 0));
  if (index_dims.empty() || b >= std::min(data_dims.size(), index_dims.size()))
    fail(node, "batch_dims does not fit data and indices");
  const auto k = static_cast<size_t>(index_dims.back());
  if (k < 1 || b + k > data_dims.size()) fail(node, "the last dimension of indices is too large");
  for (size_t d = 0; d < b; ++d)
    if (data_dims[d] != index_dims[d]) fail(node, "data and indices differ in a batch dimension");
  const int64_t batches = element_count({data_dims.begin(), data_dims.begin() + b});
  const int64_t batch_size = element_count({data_dims.begin() + b, data_dims.end()});
  const int64_t slice = element_count({data_dims.begin() + b + k, data_dims.end()});
  const int64_t tuples = in[1].size() / static_cast<int64_t>(k);  // over all batches
  const int64_t per_batch = batches == 0 ? 0 : tuples / batches;
  require_output_size(node, out[0], tuples * slice);
  const std::vector<int64_t> indices = read_ints(node, in[1], "indices");
  const std::vector<int64_t> data_strides = dense_strides(data_dims);
  const size_t es = element_size(in[0].element_type());
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t src = (t / per_batch) * batch_size;
    for (size_t d = 0; d < k; ++d)
      src += checked_index(node, indices[static_cast<size_t>(t) * k + d], data_dims[b + d], b + d) *
             data_strides[b + d];
    copy_bytes(bytes(out[0]) + static_cast<size_t>(t * slice) * es, bytes(in[0]) + src * es,
               static_cast<size_t>(slice) * es);
  }
}

// ScatterElements (and Scatter): a copy of data, then each update written to (or combined with)
// the element its index names along `axis`, in index order (a repeated index keeps the last
// update, or combines them all).
void scatter_elements(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  require_output_size(node, out[0], in[0].size());
  const std::vector<int64_t>& data_dims = in[0].shape().dims();
  const std::vector<int64_t>& index_dims = in[1].shape().dims();
  if (index_dims.size() != data_dims.size()) fail(node, "indices must have the rank of data");
  if (in[2].shape().dims() != index_dims) fail(node, "updates must have the shape of indices");
  const size_t axis = normalize_axis(node, node.attributes.get_int_or("axis", 0), data_dims.size());
  for (size_t d = 0; d < data_dims.size(); ++d)
    if (d != axis && index_dims[d] > data_dims[d])
      fail(node, "indices " + in[1].shape().to_string() + " exceed data " +
                     in[0].shape().to_string() + " in dimension " + std::to_string(d));
  const std::string reduction = node.attributes.get_string_or("reduction", "none");
  const std::vector<int64_t> indices = read_ints(node, in[1], "indices");
  const std::vector<int64_t> data_strides = dense_strides(data_dims);
  std::memcpy(bytes(out[0]), bytes(in[0]),
              static_cast<size_t>(in[0].size()) * element_size(in[0].element_type()));
  dispatch_any(node, in[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* updates = in[2].data<T>();
    T* y = out[0].data<T>();
    for (int64_t flat = 0; flat < in[1].size(); ++flat) {
      std::vector<int64_t> index = unravel(flat, index_dims);
      index[axis] = checked_index(node, indices[static_cast<size_t>(flat)], data_dims[axis], axis);
      int64_t dst = 0;
      for (size_t d = 0; d < index.size(); ++d) dst += index[d] * data_strides[d];
      scatter_combine(y[dst], updates[flat], reduction);
    }
  });
}

// OneHot: out[..., j (at axis), ...] = on_value when j is the index (negative counting from the
// end of depth), else off_value; an index outside [-depth, depth) gives all off_values.
void one_hot(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[2], out[0]);
  if (in[2].size() != 2) fail(node, "values must hold two elements [off_value, on_value]");
  if (in[1].size() != 1) fail(node, "depth must hold exactly one element");
  const double depth_value = in[1].value_at(0);
  if (!(depth_value >= 0)) fail(node, "depth must not be negative");
  const auto depth = static_cast<int64_t>(depth_value);
  const std::vector<int64_t>& index_dims = in[0].shape().dims();
  const size_t axis =
      normalize_axis(node, node.attributes.get_int_or("axis", -1), index_dims.size() + 1);
  std::vector<int64_t> out_dims = index_dims;
  out_dims.insert(out_dims.begin() + static_cast<std::ptrdiff_t>(axis), depth);
  if (out[0].shape().dims() != out_dims)
    fail(node, "output shape " + out[0].shape().to_string() + " is not " +
                   Shape(out_dims).to_string() + " for depth " + std::to_string(depth));
  // The indices split around the new axis: [outer, inner]; the output is [outer, depth, inner].
  const auto [outer, inner] = outer_inner(out_dims, axis);
  const size_t es = element_size(out[0].element_type());
  const uint8_t* off = bytes(in[2]);
  const uint8_t* on = off + es;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      // Non-integer indices (the op allows any numeric type) truncate toward zero.
      auto index = static_cast<int64_t>(in[0].value_at(o * inner + i));
      if (index < 0) index += depth;
      for (int64_t j = 0; j < depth; ++j)
        std::memcpy(bytes(out[0]) + static_cast<size_t>((o * depth + j) * inner + i) * es,
                    j == index ? on : off, es);
    }
  }
}

// EyeLike: zeros of the input's shape with ones on diagonal k (column - row == k), in the
// output's element type.
void eye_like(const Node& node, const Tensors& in, Tensors& out) {
  const std::vector<int64_t>& dims = in[0].shape().dims();
  if (dims.size() != 2) fail(node, "input must have rank 2");
  if (out[0].shape().dims() != dims) fail(node, "output shape differs from the input's");
  const int64_t k = node.attributes.get_int_or("k", 0);
  dispatch_any(node, out[0].element_type(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* y = out[0].data<T>();
    for (int64_t r = 0; r < dims[0]; ++r)
      for (int64_t c = 0; c < dims[1]; ++c) y[r * dims[1] + c] = store<T>(c - r == k ? 1 : 0);
  });
}

// ReverseSequence: along time_axis, batch entry b's first sequence_lens[b] elements in reverse
// order, the rest unchanged.
void reverse_sequence(const Node& node, const Tensors& in, Tensors& out) {
  require_output_type(node, in[0], out[0]);
  require_output_size(node, out[0], in[0].size());
  const std::vector<int64_t>& dims = in[0].shape().dims();
  if (dims.size() < 2) fail(node, "input must have rank >= 2");
  const auto batch_axis = static_cast<size_t>(node.attributes.get_int_or("batch_axis", 1));
  const auto time_axis = static_cast<size_t>(node.attributes.get_int_or("time_axis", 0));
  if (batch_axis > 1 || time_axis > 1 || batch_axis == time_axis)
    fail(node, "batch_axis and time_axis must be 0 and 1 in some order");
  const std::vector<int64_t> lens = read_ints(node, in[1], "sequence_lens");
  if (static_cast<int64_t>(lens.size()) != dims[batch_axis])
    fail(node, "sequence_lens has " + std::to_string(lens.size()) + " entries, the batch axis " +
                   std::to_string(dims[batch_axis]));
  const int64_t steps = dims[time_axis];
  for (size_t b = 0; b < lens.size(); ++b)
    if (lens[b] < 0 || lens[b] > steps)
      fail(node, "sequence_lens[" + std::to_string(b) + "] = " + std::to_string(lens[b]) +
                     " is out of range for time axis " + std::to_string(time_axis) + " of size " +
                     std::to_string(steps));
  const std::vector<int64_t> strides = dense_strides(dims);
  const size_t es = element_size(in[0].element_type());
  for (int64_t flat = 0; flat < in[0].size(); ++flat) {
    const std::vector<int64_t> index = unravel(flat, dims);
    const int64_t len = lens[static_cast<size_t>(index[batch_axis])];
    const int64_t t = index[time_axis];
    const int64_t src = t < len ? flat + (len - 1 - 2 * t) * strides[time_axis] : flat;
    std::memcpy(bytes(out[0]) + flat * es, bytes(in[0]) + src * es, es);
  }
}

}  // namespace

void register_shape(KernelRegistry& registry) {
  const std::vector<std::pair<const char*, ReferenceFn>> ops = {
      {"Reshape", &copy_elements},
      {"Flatten", &copy_elements},
      {"Squeeze", &copy_elements},
      {"Unsqueeze", &copy_elements},
      {"Identity", &copy_elements},
      {"Dropout", &dropout},
      {"Shape", &shape},
      {"Transpose", &transpose},
      {"Concat", &concat},
      {"Split", &split},
      {"Expand", &expand},
      {"Tile", &tile},
      {"ConstantOfShape", &constant_of_shape},
      {"Range", &range},
      {"Gather", &gather},
      {"Slice", &slice},
      {"Pad", &pad},
      {"Size", &size},
      {"Trilu", &trilu},
      {"GatherElements", &gather_elements},
      {"DepthToSpace", &depth_to_space},
      {"SpaceToDepth", &space_to_depth},
      {"ScatterND", &scatter_nd},
      {"GatherND", &gather_nd},
      {"ScatterElements", &scatter_elements},
      {"Scatter", &scatter_elements},
      {"OneHot", &one_hot},
      {"EyeLike", &eye_like},
      {"ReverseSequence", &reverse_sequence},
  };
  for (const auto& [op_type, fn] : ops) {
    ReferenceFn f = fn;
    registry.add("reference", 0, op_type,
                 [f](const KernelRequest& r) { return make_reference_kernel(r.node, f); });
  }
}

}  // namespace troupe::kernels::reference

namespace troupe::kernels {

// Declared in kernels/slice_plan.hpp: the memory plan reads Slices too.
SlicePlan read_slice_plan(const Node& node, const std::vector<Tensor>& in,
                          const std::vector<int64_t>& in_dims) {
  using reference::fail;
  using reference::normalize_axis;
  using reference::read_ints;
  const size_t rank = in_dims.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (in.size() == 1) {  // opset < 10: attributes
    starts = node.attributes.get_ints("starts");
    ends = node.attributes.get_ints("ends");
    axes = node.attributes.get_ints_or("axes", {});
  } else {
    starts = read_ints(node, in[1], "starts");
    ends = read_ints(node, in[2], "ends");
    if (in.size() > 3 && !in[3].empty()) axes = read_ints(node, in[3], "axes");
    if (in.size() > 4 && !in[4].empty()) steps = read_ints(node, in[4], "steps");
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail(node, "starts, ends, axes and steps must have the same length");

  // Starts and ends count from the back when negative and are clamped to the dimension.
  SlicePlan plan{std::vector<int64_t>(rank, 0), std::vector<int64_t>(rank, 1), in_dims};
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t d = normalize_axis(node, axes[i], rank);
    const int64_t dim = in_dims[d];
    const int64_t step = steps[i];
    if (step == 0) fail(node, "steps must not contain 0");
    int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
    int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      plan.count[d] = end > start ? (end - start + step - 1) / step : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      plan.count[d] = start > end ? (start - end - step - 1) / -step : 0;
    }
    plan.first[d] = start;
    plan.step[d] = step;
  }
  return plan;
}

}  // namespace troupe::kernels
