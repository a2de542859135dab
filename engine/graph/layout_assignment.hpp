#pragma once

#include <memory>
#include <vector>

#include "kernels/kernel.hpp"
#include "troupe/model.hpp"

namespace troupe::detail {

/// The layout of each value of a model (indexed by ValueId) as passed between kernels.
using ValueLayouts = std::vector<kernels::TensorLayout>;

/// Keeps activations in a blocked or channels-last layout where the kernel writing a value and
/// every kernel reading it prefer the same one, so chains of convolutions and pooling run without
/// reorders between them. The kernels touching a laid-out value are created again with their
/// layouts (`kernels` holds one kernel per node of `model`). Constants stay plain. With
/// `boundaries`, model inputs and outputs may be laid out too: the upload stage then reorders the
/// caller's plain tensors into that layout (and to bf16 for an input only bf16 kernels read) and
/// the download stage reorders back. Kernels are created again with `precision` (the one they
/// were first created with).
ValueLayouts assign_layouts(const Model& model,
                            std::vector<std::unique_ptr<kernels::Kernel>>& kernels, bool boundaries,
                            ElementType precision = ElementType::f32);

/// Creates again, ready to run, each kernel of `kernels` that is still a layout probe
/// (Kernel::is_layout_probe: assign_layouts recreated those it lays out), with the layouts of
/// its values in `layouts` (empty: all plain). Throws UnsupportedOperation naming a node whose
/// kernel, once prepared, no backend provides.
void replace_layout_probes(const Model& model,
                           std::vector<std::unique_ptr<kernels::Kernel>>& kernels,
                           const ValueLayouts& layouts, ElementType precision = ElementType::f32);

/// A short name of a layout for reports ("plain", "nChw8c", "nhwc", ...) of a value of `shape`.
std::string layout_name(kernels::TensorLayout layout, const Shape& shape);

/// The layout names of `node`'s outputs, comma-separated (a value `layouts` does not cover is
/// plain), as the runtime model reports them.
std::string output_layout_names(const Model& model, const Node& node, const ValueLayouts& layouts);

}  // namespace troupe::detail
