#pragma once

// The ONNX frontend: turns an ONNX ModelProto (file or buffer) into a validated troupe::Model.
//
// Mapping: graph inputs that are not initializers become model inputs (symbolic or unknown
// dimensions become Shape::dynamic); initializers and Constant nodes become constants; every other
// node becomes a troupe Node whose attributes keep their ONNX names, plus the int attribute
// `onnx_opset_attribute` holding the model's default-domain opset, which ops consult where the ONNX
// semantics changed between opsets. A node of another domain than the default one gets the op type
// qualified_op_type(domain, op_type) (engine/ops/op_schema.hpp), "<domain>::<op_type>", so that
// it finds only the schema and kernels of its own domain's op (troupe implements the optimizers of
// "ai.onnx.preview.training"); a node of any other domain is refused as unsupported. Graph outputs
// become model outputs.
//
// The model goes through libonnx's checker (when libonnx knows its IR and opset versions); shapes
// and types are inferred by troupe's op schemas (Model::validate), not by libonnx.
//
// Errors name the source (file path, or "<memory buffer>") and what is wrong: FormatError for a
// file that is not ONNX, truncated or malformed; UnsupportedOperation for ops, element types and
// ONNX features troupe does not implement; ModelError for an inconsistent model (bad external data,
// shapes that cannot be inferred, ...); InvalidArgument when the file cannot be opened.

#include <cstddef>
#include <memory>
#include <string>

#include "troupe/model.hpp"
#include "troupe/tensor.hpp"

namespace troupe::serialization {

/// Name of the int attribute the reader puts on every node: the model's default-domain opset.
inline constexpr const char* onnx_opset_attribute = "opset";

/// The largest rank a tensor or value of an ONNX model may have (ONNX sets none; NumPy's is 32
/// and 64 since NumPy 2). A longer `dims` or `shape.dim` is refused with a ModelError naming it.
inline constexpr int onnx_max_rank = 64;

/// Reads an ONNX model file; external data files are looked up relative to its directory.
std::shared_ptr<Model> read_onnx_model(const std::string& path);

/// Reads an ONNX model from memory. Tensors stored as external data are read from files relative to
/// `base_dir_for_external_data`; with an empty base directory such tensors are an error.
std::shared_ptr<Model> read_onnx_model_from_buffer(
    const void* data, size_t size, const std::string& base_dir_for_external_data = "");

/// Reads a serialized ONNX TensorProto file (the `input_0.pb` files of the ONNX test suite).
Tensor read_onnx_tensor(const std::string& path);

/// Reads a serialized ONNX TensorProto from memory; `source` names it in errors.
Tensor read_onnx_tensor_from_buffer(const void* data, size_t size,
                                    const std::string& source = "<memory buffer>");

}  // namespace troupe::serialization
