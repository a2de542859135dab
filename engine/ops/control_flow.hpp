#pragma once

// If, Loop and Scan: nodes that run subgraphs (Subgraph attributes). A subgraph's inputs are the
// op's formal ones (none for If; iteration number, condition and loop-carried values for Loop;
// states and scan slices for Scan) followed by the values it reads from the enclosing graph,
// named as those values; the node lists those values after its own formal inputs, and records
// how many formal inputs it has in `formal_inputs_attribute`.

#include <memory>
#include <string>
#include <vector>

#include "troupe/model.hpp"

namespace troupe::control_flow {

inline constexpr const char* formal_inputs_attribute = "troupe_formal_inputs";
/// Followed by a graph attribute's name: the node input each of that subgraph's inputs after
/// its formal ones reads (ints). Without it, inputs are matched by their values' names.
inline constexpr const char* captured_attribute_prefix = "troupe_captured_";

bool is_control_flow(const std::string& op_type);

/// Whether `node` is a Scan of ONNX opset 8 (the opset the ONNX reader records on every node):
/// its first input is the optional sequence_lens, and its states, scan inputs and scan outputs
/// have a leading batch axis, each batch entry scanned on its own along axis 1. Scan from opset 9
/// on has neither.
bool is_batched_scan(const Node& node);

/// How many of the node's inputs are the op's own (the rest feed its subgraphs).
size_t formal_inputs(const Node& node);

/// How many of `body`'s inputs are formal for this node's op (If 0; Loop 2 + carried; Scan
/// states + scan inputs, which for a batched Scan leaves out sequence_lens).
size_t body_formal_inputs(const Node& node);

/// For each input of the subgraph in graph attribute `attribute` after its formal ones, the index
/// of the node input it reads (`input_names`: the names of the node's input values, for nodes
/// without positions).
std::vector<size_t> captured_inputs(const Node& node, const std::string& attribute,
                                    const std::vector<std::string>& input_names);

/// A copy of `body` with its inputs' types and shapes set (`inputs`: one per body input) and
/// every other value inferred from them. Throws ModelError naming the node when the subgraph is
/// invalid with these inputs.
std::shared_ptr<Model> bind_subgraph(const Node& node, const Model& body,
                                     const std::vector<ValueInfo>& inputs);

}  // namespace troupe::control_flow
