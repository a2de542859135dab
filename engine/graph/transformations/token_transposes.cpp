// Vision transformers with convolutions between their layers (PVT, SegFormer, CvT, LeViT's
// attention downsampling) turn their token sequence [B, N, C] into an image and back as PyTorch
// writes it: x.transpose(1, 2).reshape(B, C, H, W) before the convolution and
// y.flatten(2).transpose(1, 2) after it. The token sequence in memory already is the image with
// its channels last, but written this way both moves are full transposes of [N, C] matrices, and
// the convolution between them runs on plain tensors.
//
// Swapping each pair's order keeps the values and moves the work to the image's axes:
//   Transpose(0,2,1) -> Reshape[B,C,H,W]   becomes   Reshape[B,H,W,C] -> Transpose(0,3,1,2)
//   Reshape[B,C,N] -> Transpose(0,2,1)     becomes   Transpose(0,2,3,1) -> Reshape[B,N,C]
// (and likewise with 1 or 3 spatial axes). The Reshapes are views; the Transposes move the
// channels between last and second, which the Transpose kernel does straight from or into the
// convolutions' layout (kernels/dnnl/transpose.cpp), so the convolution runs laid out and each
// move is one reorder in memory order.
#include <numeric>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"

namespace troupe::transformations {

namespace {

std::vector<int64_t> perm_of(const Node& node) {
  return node.attributes.get_ints_or("perm", {});
}

bool static_shape(const Model& model, ValueId v, size_t rank) {
  const Shape& s = model.value(v).shape;
  return s.is_static() && s.rank() == rank;
}

// The product of dims [first, end).
int64_t product(const Shape& shape, size_t first) {
  int64_t p = 1;
  for (size_t i = first; i < shape.rank(); ++i) p *= shape[i];
  return p;
}

// [B, C, S...] with the channel axis moved last: [B, S..., C].
Shape channels_last(const Shape& image) {
  std::vector<int64_t> dims{image[0]};
  for (size_t i = 2; i < image.rank(); ++i) dims.push_back(image[i]);
  dims.push_back(image[1]);
  return Shape(dims);
}

ValueId shape_constant(Model& model, const std::string& name, const Shape& shape) {
  const std::vector<int64_t> dims(shape.dims().begin(), shape.dims().end());
  return model.add_constant(
      unique_value_name(model, name),
      Tensor::from_vector<int64_t>(Shape({static_cast<int64_t>(dims.size())}), dims));
}

}  // namespace

size_t transpose_tokens_as_images(Model& model) {
  const std::vector<int> consumer = single_consumers(model);
  std::vector<Node> nodes = model.nodes();
  size_t rewrites = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Node& first = nodes[i];
    if (first.outputs.size() != 1 || first.inputs.empty()) continue;
    const ValueId middle = first.outputs[0];
    const int reader = consumer[static_cast<size_t>(middle)];
    if (reader < 0 || is_model_output(model, middle)) continue;
    Node& second = nodes[static_cast<size_t>(reader)];
    if (second.outputs.size() != 1) continue;
    const ValueId in = first.inputs[0], out = second.outputs[0];

    // Tokens -> image: Transpose(0,2,1) of [B,N,C], then Reshape to [B,C,S...] with prod(S) = N.
    if (is_op(first, "Transpose", 1) && perm_of(first) == std::vector<int64_t>{0, 2, 1} &&
        second.op_type == "Reshape" && static_shape(model, in, 3)) {
      const Shape tokens = model.value(in).shape;  // copies: add_constant grows the values
      const Shape image = model.value(out).shape;
      if (!image.is_static() || image.rank() < 3 || image.rank() > 5 || image[0] != tokens[0] ||
          image[1] != tokens[2] || product(image, 2) != tokens[1])
        continue;
      const Shape shuffled = channels_last(image);
      const ValueId target = shape_constant(model, second.name + "_channels_last_shape", shuffled);
      const ValueId laid = middle;  // validate() infers its new shape
      std::vector<int64_t> perm{0, static_cast<int64_t>(image.rank() - 1)};
      for (int64_t a = 1; a + 1 < static_cast<int64_t>(image.rank()); ++a) perm.push_back(a);
      Node reshape{second.name, "Reshape", {in, target}, {laid}, {}};
      Node transpose{first.name, "Transpose", {laid}, {out}, {}};
      transpose.attributes.set("perm", perm);
      first = std::move(reshape);
      second = std::move(transpose);
      ++rewrites;
      continue;
    }

    // Image -> tokens: Reshape of [B,C,S...] to [B,C,N], then Transpose(0,2,1).
    if (first.op_type == "Reshape" && is_op(second, "Transpose", 1) &&
        perm_of(second) == std::vector<int64_t>{0, 2, 1} && static_shape(model, out, 3)) {
      const Shape image = model.value(in).shape;
      const Shape tokens = model.value(out).shape;
      if (!image.is_static() || image.rank() < 4 || image.rank() > 5 || image[0] != tokens[0] ||
          image[1] != tokens[2] || product(image, 2) != tokens[1])
        continue;
      const ValueId laid = middle;  // validate() infers its new shape
      const ValueId target = shape_constant(model, first.name + "_tokens_shape", tokens);
      std::vector<int64_t> perm{0};
      for (int64_t a = 2; a < static_cast<int64_t>(image.rank()); ++a) perm.push_back(a);
      perm.push_back(1);
      Node transpose{second.name, "Transpose", {in}, {laid}, {}};
      transpose.attributes.set("perm", perm);
      Node reshape{first.name, "Reshape", {laid, target}, {out}, {}};
      first = std::move(transpose);
      second = std::move(reshape);
      ++rewrites;
    }
  }
  if (rewrites == 0) return 0;
  model.set_nodes(std::move(nodes));
  model.validate();
  return rewrites;
}

}  // namespace troupe::transformations
