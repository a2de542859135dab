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
// (and likewise with 3 spatial axes; a Conv1d reads the Transpose(0,2,1) of its tokens as is). The
// Reshapes are views; the Transposes move the channels between last and second, which the Transpose
// kernel does straight from or into the convolutions' layout (kernels/dnnl/transpose.cpp), so the
// convolution runs laid out and each move is one reorder in memory order.
#include <string>
#include <vector>

#include "engine/graph/transformations/pattern_matching.hpp"

namespace troupe::transformations {

namespace {

std::vector<int64_t> perm_of(const Node& node) {
  return node.attributes.get_ints_or("perm", {});
}

// Whether `image` [B, C, S...] (2 or 3 spatial axes) holds the tokens [B, N, C] of
// `tokens` with N = prod(S): the shapes a transpose(1, 2) and a reshape turn into each other.
bool image_of_tokens(const Shape& image, const Shape& tokens) {
  if (!image.is_static() || image.rank() < 4 || image.rank() > 5 || tokens.rank() != 3 ||
      image[0] != tokens[0] || image[1] != tokens[2])
    return false;
  int64_t n = 1;
  for (size_t i = 2; i < image.rank(); ++i) n *= image[i];
  return n == tokens[1];
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
        second.op_type == "Reshape") {
      const Shape image = model.value(out).shape;  // a copy: add_constant grows the values
      if (!image_of_tokens(image, model.value(in).shape)) continue;
      const ValueId target =
          shape_constant(model, second.name + "_channels_last_shape", channels_last(image));
      std::vector<int64_t> perm{0, static_cast<int64_t>(image.rank() - 1)};
      for (int64_t a = 1; a + 1 < static_cast<int64_t>(image.rank()); ++a) perm.push_back(a);
      // `middle` now holds the image channels-last; validate() infers its new shape.
      Node reshape{second.name, "Reshape", {in, target}, {middle}, {}};
      Node transpose{first.name, "Transpose", {middle}, {out}, {}};
      transpose.attributes.set("perm", perm);
      first = std::move(reshape);
      second = std::move(transpose);
      ++rewrites;
      continue;
    }

    // Image -> tokens: Reshape of [B,C,S...] to [B,C,N], then Transpose(0,2,1).
    if (first.op_type == "Reshape" && is_op(second, "Transpose", 1) &&
        perm_of(second) == std::vector<int64_t>{0, 2, 1}) {
      const Shape tokens = model.value(out).shape;  // a copy: add_constant grows the values
      const size_t rank = model.value(in).shape.rank();
      if (!image_of_tokens(model.value(in).shape, tokens)) continue;
      const ValueId target = shape_constant(model, first.name + "_tokens_shape", tokens);
      std::vector<int64_t> perm{0};
      for (int64_t a = 2; a < static_cast<int64_t>(rank); ++a) perm.push_back(a);
      perm.push_back(1);
      Node transpose{second.name, "Transpose", {in}, {middle}, {}};
      transpose.attributes.set("perm", perm);
      Node reshape{first.name, "Reshape", {middle, target}, {out}, {}};
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
