// Ops that only move elements, as one strided copy each (strided_copy.hpp): Expand (a broadcast
// axis read with stride 0), Tile (each axis seen as [repeats, size], the repeats read with stride
// 0), DepthToSpace and SpaceToDepth (the six-axis view of the channel/block shuffle). The
// reference kernels walk every element through an index vector: tiling [1,64,56,56] by 2x2 took
// 22 ms there, a DepthToSpace of [1,256,128,128] (a super-resolution head) 16 ms.
#include <string>
#include <vector>

#include "kernels/dnnl/dnnl_backend.hpp"
#include "kernels/dnnl/dnnl_kernel.hpp"
#include "kernels/dnnl/strided_copy.hpp"
#include "troupe/error.hpp"

namespace troupe::kernels::onednn {

namespace {

using Ints = std::vector<int64_t>;

[[noreturn]] void fail(const Node& node, const std::string& message) {
  throw ExecutionError(node.op_type + " node '" + node.name + "': " + message);
}

void check_types(const Node& node, const Tensor& in, const Tensor& out) {
  if (in.element_type() != out.element_type())
    fail(node, "output element type differs from the input's");
}

class ExpandKernel final : public Kernel {
 public:
  explicit ExpandKernel(const KernelRequest& r) : node_(r.node) {}
  std::string implementation() const override { return "dnnl:strided_copy"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    check_types(node_, in[0], out[0]);
    const Tensor x = in[0].contiguous();
    const Ints& out_dims = out[0].shape().dims();
    const Ints& in_dims = x.shape().dims();
    if (in_dims.size() > out_dims.size()) fail(node_, "the input has more axes than the output");
    const size_t lead = out_dims.size() - in_dims.size();
    const Ints in_strides = dense_strides(in_dims);
    Ints src_strides(out_dims.size(), 0);
    for (size_t d = 0; d < in_dims.size(); ++d) {
      const int64_t o = out_dims[lead + d];
      if (in_dims[d] != o && in_dims[d] != 1)
        fail(node_, "input shape " + x.shape().to_string() + " does not broadcast to " +
                        out[0].shape().to_string());
      src_strides[lead + d] = in_dims[d] == 1 ? 0 : in_strides[d];
    }
    strided_copy(out_dims, static_cast<const uint8_t*>(x.raw_data()), src_strides,
                 static_cast<uint8_t*>(out[0].raw_data()), dense_strides(out_dims),
                 element_size(x.element_type()));
  }

 private:
  Node node_;
};

class TileKernel final : public Kernel {
 public:
  explicit TileKernel(const KernelRequest& r) : node_(r.node) {}
  std::string implementation() const override { return "dnnl:strided_copy"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    check_types(node_, in[0], out[0]);
    const Tensor x = in[0].contiguous();
    const Ints& in_dims = x.shape().dims();
    const Ints& out_dims = out[0].shape().dims();
    if (in.size() < 2 || in[1].size() != static_cast<int64_t>(in_dims.size()) ||
        out_dims.size() != in_dims.size())
      fail(node_, "repeats must hold one value per input axis");
    // Each axis as [repeats, size]: the repeats step over whole copies in the output and stay put
    // in the input.
    const Ints in_strides = dense_strides(in_dims);
    const Ints out_strides = dense_strides(out_dims);
    Ints dims, src, dst;
    for (size_t d = 0; d < in_dims.size(); ++d) {
      const int64_t repeats = static_cast<int64_t>(in[1].value_at(static_cast<int64_t>(d)));
      if (repeats < 0 || out_dims[d] != in_dims[d] * repeats)
        fail(node_, "output shape " + out[0].shape().to_string() + " is not the input shape " +
                        x.shape().to_string() + " times the repeats");
      dims.insert(dims.end(), {repeats, in_dims[d]});
      src.insert(src.end(), {0, in_strides[d]});
      dst.insert(dst.end(), {in_dims[d] * out_strides[d], out_strides[d]});
    }
    strided_copy(dims, static_cast<const uint8_t*>(x.raw_data()), src,
                 static_cast<uint8_t*>(out[0].raw_data()), dst, element_size(x.element_type()));
  }

 private:
  Node node_;
};

// DepthToSpace (to_space) and SpaceToDepth on [N, C, H, W], as one copy over the six axes of the
// shuffle, [N, C', H', b, b, W'] (to space) or [N, b, b, C, H', W'] (to depth), with each side's
// strides for them: DCR keeps the block offsets before the channel, CRD after.
class DepthSpaceKernel final : public Kernel {
 public:
  DepthSpaceKernel(const KernelRequest& r, bool to_space)
      : node_(r.node),
        to_space_(to_space),
        block_(r.node.attributes.get_int("blocksize")),
        crd_(to_space && r.node.attributes.get_string_or("mode", "DCR") == "CRD") {}
  std::string implementation() const override { return "dnnl:strided_copy"; }

  void execute(const std::vector<Tensor>& in, std::vector<Tensor>& out) override {
    check_types(node_, in[0], out[0]);
    const Tensor x = in[0].contiguous();
    const Ints& in_dims = x.shape().dims();
    const Ints& out_dims = out[0].shape().dims();
    const int64_t b = block_;
    if (in_dims.size() != 4 || out_dims.size() != 4 || b < 1 || out[0].size() != x.size())
      fail(node_, "expects 4-D tensors of the same size and a positive blocksize");
    const Ints& space = to_space_ ? out_dims : in_dims;  // [N, C, H, W]
    const int64_t n = space[0], c = space[1], h = space[2], w = space[3];
    if (h % b || w % b) fail(node_, "the spatial sizes must be multiples of the blocksize");
    const int64_t hd = h / b, wd = w / b;  // the depth side's spatial sizes
    Ints dims, src, dst;
    if (to_space_) {
      // Input [N, C*b*b, H', W'] read at (n, c, i, y, j, x) for output (n, c, y*b + i, x*b + j).
      const int64_t plane = hd * wd;
      const int64_t c_stride = crd_ ? b * b * plane : plane;
      const int64_t i_stride = crd_ ? b * plane : b * c * plane;
      const int64_t j_stride = crd_ ? plane : c * plane;
      // Rows of W' input elements (contiguous) go to every b-th output element: the copy's
      // innermost axis is x, read in a run and written with stride b.
      dims = {n, c, hd, b, b, wd};
      src = {c * b * b * plane, c_stride, wd, i_stride, j_stride, 1};
      dst = {c * h * w, h * w, b * w, w, 1, b};
    } else {
      // Output [N, b*b*C, H', W'] at (n, (i*b + j)*C + c, y, x) reads input (n, c, y*b + i, x*b +
      // j).
      dims = {n, b, b, c, hd, wd};
      src = {c * h * w, w, 1, h * w, b * w, b};
      dst = dense_strides(dims);
    }
    strided_copy(dims, static_cast<const uint8_t*>(x.raw_data()), src,
                 static_cast<uint8_t*>(out[0].raw_data()), dst, element_size(x.element_type()));
  }

 private:
  Node node_;
  bool to_space_;
  int64_t block_;
  bool crd_;
};

}  // namespace

void register_rearrangements(KernelRegistry& registry) {
  registry.add(backend_name, backend_priority, "Expand",
               [](const KernelRequest& r) -> std::unique_ptr<Kernel> {
                 return plain_data(r) ? std::make_unique<ExpandKernel>(r) : nullptr;
               });
  registry.add(backend_name, backend_priority, "Tile",
               [](const KernelRequest& r) -> std::unique_ptr<Kernel> {
                 return plain_data(r) ? std::make_unique<TileKernel>(r) : nullptr;
               });
  for (const bool to_space : {true, false})
    registry.add(backend_name, backend_priority, to_space ? "DepthToSpace" : "SpaceToDepth",
                 [to_space](const KernelRequest& r) -> std::unique_ptr<Kernel> {
                   if (!plain_data(r) || !r.node.attributes.has("blocksize")) return nullptr;
                   return std::make_unique<DepthSpaceKernel>(r, to_space);
                 });
}

}  // namespace troupe::kernels::onednn
